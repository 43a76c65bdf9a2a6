//! Hot swap: two reward plugins, one config line changed, different
//! rewards, same host binary.

mod common;

use onebrain_core::{EpisodeSummary, Reward};
use onebrain_runtime::RuntimeConfig;

#[test]
fn one_config_line_swaps_the_reward() {
    common::build();
    let root = common::root();
    let flat = common::test_guest("flat-reward");
    let flat = flat.strip_prefix(&root).unwrap().display().to_string();
    let config = |reward_line: &str| {
        RuntimeConfig::from_toml(&format!("plugin-dirs = [\"plugins\"]\n{reward_line}\n[limits]\ntimeout-ms = 1000\n"))
            .unwrap()
    };
    let ep = EpisodeSummary { b0: false, judge_score: 0.9, solved_final: true, repairs: 3, ..Default::default() };

    let paper = config("reward = \"paper-rewards\"").load(&root).unwrap().reward.unwrap();
    let swapped = config(&format!("reward = \"{flat}\"")).load(&root).unwrap().reward.unwrap();
    let a = paper.rewards(&ep).unwrap();
    let b = swapped.rewards(&ep).unwrap();
    assert!((a.actor - 0.27).abs() < 1e-6 && (a.editor - 0.7).abs() < 1e-6 && a.judge == -1.0, "{a:?}");
    assert_eq!((b.actor, b.editor, b.judge), (0.0, 1.0, 0.0));

    // A reference to a plugin of the wrong world is refused before it runs.
    let wrong = config("reward = \"blocksworld\"").load(&root);
    assert!(wrong.is_err());
}
