//! Hot swap and versions: a reward plugin built against API 0.1.0 (`flat-reward`,
//! straight from the frozen WIT) and the bundled 0.2.0 plugins in one host; one
//! config line swaps one reward for the other, same host binary.

mod common;

use onebrain_core::{Reward, Rewards};
use onebrain_runtime::{ApiVersion, InstancePolicy, Limits, RuntimeConfig, WasmReward, World};

fn config(reward_line: &str) -> RuntimeConfig {
    RuntimeConfig::from_toml(&format!("plugin-dirs = [\"plugins\"]\n{reward_line}\n[limits]\ntimeout-ms = 1000\n"))
        .unwrap()
}

#[test]
fn one_config_line_swaps_a_0_1_0_reward_for_a_0_2_0_one() {
    let root = common::root();
    let flat = common::test_guest("flat-reward");
    let flat = flat.strip_prefix(&root).unwrap().display().to_string();
    let ep = common::episode(false, 0.9, true, 3);

    let old = config(&format!("reward = \"{flat}\"")).load(&root).unwrap().reward.unwrap();
    let new = config("reward = \"paper-rewards\"").load(&root).unwrap().reward.unwrap();
    let a = old.rewards(&ep).unwrap();
    let b = new.rewards(&ep).unwrap();
    assert_eq!(a, Rewards { actor: 0.0, editor: 1.0, judge: 0.0, editor_steps: None });
    assert!((b.actor - 0.27).abs() < 1e-6 && (b.editor - 0.7).abs() < 1e-6 && b.judge == -1.0, "{b:?}");

    // A reference to a plugin of the wrong world is refused before it runs.
    let wrong = config("reward = \"blocksworld\"").load(&root);
    assert!(wrong.is_err());
}

#[test]
fn a_0_1_0_reward_loads_beside_0_2_0_plugins_and_gives_what_it_gave_before() {
    let host = common::host(Limits::default());
    let old = common::guest(&host, "flat-reward", World::Reward);
    let new = common::bundled(&host, "paper-rewards");
    let domain = common::bundled(&host, "blocksworld");
    assert_eq!((old.api_version, new.api_version, domain.api_version), (ApiVersion::V0_1_0, ApiVersion::V0_2_0, ApiVersion::V0_2_0));
    let old = WasmReward::new(&old, InstancePolicy::Reuse).unwrap();
    let new = WasmReward::new(&new, InstancePolicy::Reuse).unwrap();
    // What flat-reward returned under a 0.1.0-only host: R_A = b_0, R_E = b_T, 0, for
    // every shape of episode, read through the summary 0.1.0 sees.
    for (b0, bt, t) in [(true, true, 0), (false, false, 0), (false, true, 1), (false, false, 5), (false, true, 4)] {
        let ep = common::episode(b0, 0.3, bt, t);
        let r = old.try_rewards(&ep).unwrap();
        let b = |x: bool| if x { 1.0 } else { 0.0 };
        assert_eq!(r, Rewards { actor: b(b0), editor: b(bt), judge: 0.0, editor_steps: None }, "{b0} {bt} {t}");
        // Calls alternate between the versions in one host.
        assert!(new.try_rewards(&ep).is_ok());
    }
}
