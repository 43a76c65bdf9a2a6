//! A plugin built against API 0.1.0, as one written before 0.2.0 was: no SDK,
//! wit-bindgen straight from the frozen `wit/since_v0.1.0`, and the version
//! section written by hand, as SDK 0.1 wrote it. It proves that 0.1.0
//! plugins keep loading and keep giving the same rewards, and it is the
//! second reward of the hot-swap test: solver outcomes only, no Judge term,
//! no repair cost (R_A = b_0, R_E = b_T, Judge reward 0).

wit_bindgen::generate!({ path: "../../../wit/since_v0.1.0", world: "reward" });

/// The section the host reads before it instantiates.
#[used]
#[link_section = "onebrain:api-version"]
static API_VERSION: [u8; 5] = *b"0.1.0";

struct Flat;

impl Guest for Flat {
    fn episode_rewards(ep: EpisodeSummary) -> Result<Rewards, String> {
        let b = |x: bool| if x { 1.0 } else { 0.0 };
        Ok(Rewards { actor: b(ep.b0), editor: b(ep.solved_final), judge: 0.0 })
    }
}

export!(Flat);
