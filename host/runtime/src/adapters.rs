//! The `onebrain-core` seams, implemented by calling plugins. The rest of
//! onebrain sees [`Reward`], [`Checker`], [`DomainAdapter`] and
//! [`DiagnosticParser`], never wasmtime.

use onebrain_core::{
    BoxError, Checker, DiagnosticParser, Diagnostic, DomainAdapter, FaithfulnessReport, FinishedEpisode, Reward,
    Rewards, SolverOutput, Spec, Task,
};
use wasmtime::component::InstancePre;
use wasmtime::Store;

use crate::error::PluginError;
use crate::host::LoadedPlugin;
use crate::instance::{CallCost, InstancePolicy, Slot, WorldBindings};
use crate::limits::OutputSize;
use crate::manifest::{CallBudget, World};
use crate::state::StoreState;
use crate::validate;
use crate::wit::latest::{self, diagnostic_parser as dp, domain_adapter as da, faithfulness_checker as fc, reward as rw};
use crate::wit::{since_v0_1_0, since_v0_2_0, since_v0_3_0, ApiVersion};

macro_rules! world_bindings {
    ($bindings:ty, $pre:ident, $world:expr) => {
        impl WorldBindings for $bindings {
            const WORLD: World = $world;
            type Pre = $pre<StoreState>;
            fn pre(pre: InstancePre<StoreState>) -> wasmtime::Result<Self::Pre> {
                $pre::new(pre)
            }
            fn instantiate(pre: &Self::Pre, store: &mut Store<StoreState>) -> wasmtime::Result<Self> {
                pre.instantiate(store)
            }
        }
    };
}

use da::DomainAdapterPre;
use dp::DiagnosticParserPre;
use fc::FaithfulnessCheckerPre;
use rw::RewardPre;
use since_v0_1_0::reward::RewardPre as RewardPreV0_1_0;
use since_v0_2_0::faithfulness_checker::FaithfulnessCheckerPre as FaithfulnessCheckerPreV0_2_0;
use since_v0_3_0::diagnostic_parser::DiagnosticParserPre as DiagnosticParserPreV0_3_0;

world_bindings!(rw::Reward, RewardPre, World::Reward);
world_bindings!(since_v0_1_0::reward::Reward, RewardPreV0_1_0, World::Reward);
world_bindings!(da::DomainAdapter, DomainAdapterPre, World::DomainAdapter);
world_bindings!(dp::DiagnosticParser, DiagnosticParserPre, World::DiagnosticParser);
world_bindings!(since_v0_3_0::diagnostic_parser::DiagnosticParser, DiagnosticParserPreV0_3_0, World::DiagnosticParser);
world_bindings!(fc::FaithfulnessChecker, FaithfulnessCheckerPre, World::FaithfulnessChecker);
world_bindings!(
    since_v0_2_0::faithfulness_checker::FaithfulnessChecker,
    FaithfulnessCheckerPreV0_2_0,
    World::FaithfulnessChecker
);

impl OutputSize for latest::types::Rewards {
    fn output_size(&self) -> usize {
        12 + self.editor_steps.as_ref().map_or(0, |s| 4 * s.len())
    }
}

impl OutputSize for since_v0_1_0::reward::onebrain::plugin::types::Rewards {
    fn output_size(&self) -> usize {
        12
    }
}

impl OutputSize for latest::types::Task {
    fn output_size(&self) -> usize {
        let r = self.reference.as_ref().map_or(0, |s| s.domain.len() + s.problem.len());
        self.id.len() + self.domain.len() + self.text.len() + r
    }
}

impl OutputSize for latest::types::Diagnostic {
    fn output_size(&self) -> usize {
        self.message.len() + 16
    }
}

impl OutputSize for latest::types::FaithfulnessReport {
    fn output_size(&self) -> usize {
        self.explanation.output_size() + 32
    }
}

fn boxed(e: PluginError) -> BoxError {
    Box::new(e)
}

/// A `reward` plugin as a [`Reward`], of either API version: a 0.1.0 plugin sees the
/// episode's eight numbers ([`FinishedEpisode::summary`]), a 0.2.0 one the whole episode.
pub struct WasmReward {
    slot: RewardSlot,
}

/// The bindings a reward plugin is called through, by the API version it was built for
/// (0.2.0's reward world is 0.3.0's and 0.4.0's).
enum RewardSlot {
    V0_1_0(Slot<since_v0_1_0::reward::Reward>),
    Latest(Slot<rw::Reward>),
}

impl WasmReward {
    /// Wraps `plugin`, which must implement the `reward` world.
    pub fn new(plugin: &LoadedPlugin, policy: InstancePolicy) -> Result<Self, PluginError> {
        let slot = match plugin.api_version {
            ApiVersion::V0_1_0 => RewardSlot::V0_1_0(Slot::new(plugin, policy)?),
            ApiVersion::V0_2_0 | ApiVersion::V0_3_0 | ApiVersion::V0_4_0 => RewardSlot::Latest(Slot::new(plugin, policy)?),
        };
        Ok(WasmReward { slot })
    }

    /// The rewards for `episode`, with the typed error.
    pub fn try_rewards(&self, episode: &FinishedEpisode) -> Result<Rewards, PluginError> {
        let editor_steps = episode.repairs();
        match &self.slot {
            RewardSlot::V0_1_0(slot) => {
                let ep = since_v0_1_0::reward::onebrain::plugin::types::EpisodeSummary::from(&episode.summary());
                let limits = slot.limits();
                slot.call(
                    |b, store| b.call_episode_rewards(store, ep),
                    |r| validate::rewards(Rewards::from(r), editor_steps, limits),
                )
            }
            RewardSlot::Latest(slot) => {
                let ep = latest::types::FinishedEpisode::from(episode.clone());
                let limits = slot.limits();
                slot.call(
                    |b, store| b.call_episode_rewards(store, &ep),
                    |r| validate::rewards(Rewards::from(r), editor_steps, limits),
                )
            }
        }
    }
}

impl Reward for WasmReward {
    fn rewards(&self, episode: &FinishedEpisode) -> Result<Rewards, BoxError> {
        self.try_rewards(episode).map_err(boxed)
    }
}

/// A `domain-adapter` plugin as a [`DomainAdapter`].
pub struct WasmDomainAdapter {
    slot: Slot<da::DomainAdapter>,
    name: String,
    origin: std::path::PathBuf,
}

impl WasmDomainAdapter {
    /// Wraps `plugin`, which must implement the `domain-adapter` world, and
    /// asks it for its name (the smoke call), which must be the plugin's own
    /// (its manifest's and folder's) name: a plugin cannot answer for another
    /// domain.
    pub fn new(plugin: &LoadedPlugin, policy: InstancePolicy) -> Result<Self, PluginError> {
        let slot = Slot::new(plugin, policy)?;
        let expected = slot.name().to_string();
        let name = slot.call(
            |b: &da::DomainAdapter, store| b.call_name(store).map(Ok::<String, String>),
            |n| validate::domain_name(n, &expected),
        )?;
        Ok(WasmDomainAdapter { slot, name, origin: plugin.manifest.component_path() })
    }

    /// Where the plugin came from, for messages: its component file.
    pub fn origin(&self) -> String {
        crate::text::escape_path(&self.origin)
    }

    /// [`DomainAdapter::description`] with the typed error.
    pub fn try_description(&self) -> Result<String, PluginError> {
        self.slot.call(|b, store| b.call_description(store), |s| Ok(validate::text(s)))
    }

    /// [`DomainAdapter::domain_pddl`] with the typed error.
    pub fn try_domain_pddl(&self) -> Result<String, PluginError> {
        self.slot.call(|b, store| b.call_domain_pddl(store), |s| Ok(validate::text(s)))
    }

    /// [`DomainAdapter::generate`] with the typed error.
    pub fn try_generate(&self, seed: u64, size: u32) -> Result<Task, PluginError> {
        self.slot.call(|b, store| b.call_generate(store, seed, size), |t| validate::task(Task::from(t), &self.name))
    }

    /// [`DomainAdapter::describe`] with the typed error.
    pub fn try_describe(&self, problem_pddl: &str) -> Result<String, PluginError> {
        self.slot.call(|b, store| b.call_describe(store, problem_pddl), |s| Ok(validate::text(s)))
    }
}

impl DomainAdapter for WasmDomainAdapter {
    fn name(&self) -> String {
        self.name.clone()
    }
    fn description(&self) -> Result<String, BoxError> {
        self.try_description().map_err(boxed)
    }
    fn domain_pddl(&self) -> Result<String, BoxError> {
        self.try_domain_pddl().map_err(boxed)
    }
    fn generate(&self, seed: u64, size: u32) -> Result<Task, BoxError> {
        self.try_generate(seed, size).map_err(boxed)
    }
    fn describe(&self, problem_pddl: &str) -> Result<String, BoxError> {
        self.try_describe(problem_pddl).map_err(boxed)
    }
}

/// A `diagnostic-parser` plugin as a [`DiagnosticParser`], of any API version: one built
/// before 0.4.0 has `parse` only (its `review` answers nothing), a 0.4.0 one also reviews a
/// spec against the task's text.
pub struct WasmDiagnosticParser {
    slot: ParserSlot,
}

/// The bindings a diagnostic parser is called through: 0.4.0's world has `review`, 0.1.0's
/// to 0.3.0's (the same world) do not.
enum ParserSlot {
    V0_3_0(Slot<since_v0_3_0::diagnostic_parser::DiagnosticParser>),
    Latest(Slot<dp::DiagnosticParser>),
}

impl WasmDiagnosticParser {
    /// Wraps `plugin`, which must implement the `diagnostic-parser` world.
    pub fn new(plugin: &LoadedPlugin, policy: InstancePolicy) -> Result<Self, PluginError> {
        let slot = match plugin.api_version {
            ApiVersion::V0_1_0 | ApiVersion::V0_2_0 | ApiVersion::V0_3_0 => ParserSlot::V0_3_0(Slot::new(plugin, policy)?),
            ApiVersion::V0_4_0 => ParserSlot::Latest(Slot::new(plugin, policy)?),
        };
        Ok(WasmDiagnosticParser { slot })
    }

    /// Wraps `plugin` as a reviewer (a config's `diagnostic-reviewers`): it must implement
    /// the `diagnostic-parser` world of 0.4.0 or later, which has `review`. An older one is
    /// refused with its name, the version it was built for and what to do.
    pub fn reviewer(plugin: &LoadedPlugin, policy: InstancePolicy) -> Result<Self, PluginError> {
        let parser = Self::new(plugin, policy)?;
        if let ParserSlot::V0_3_0(_) = parser.slot {
            return Err(PluginError::new(
                plugin.id(),
                crate::PluginErrorKind::WorldMismatch {
                    world: "diagnostic-parser".into(),
                    reason: format!(
                        "it was built for onebrain:plugin@{}, whose diagnostic parsers have no `review` \
                         (new in 0.4.0), so it cannot be a diagnostic reviewer; rebuild it with onebrain-sdk 0.4.0",
                        plugin.api_version.as_str()
                    ),
                },
            ));
        }
        Ok(parser)
    }

    /// [`DiagnosticParser::parse`] with the typed error.
    pub fn try_parse(&self, raw: &SolverOutput, native: &[Diagnostic]) -> Result<Vec<Diagnostic>, PluginError> {
        match &self.slot {
            ParserSlot::Latest(slot) => {
                let raw = latest::types::SolverOutput::from(raw.clone());
                let native: Vec<_> = native.iter().cloned().map(latest::types::Diagnostic::from).collect();
                let limits = slot.limits();
                slot.call(
                    |b, store| b.call_parse(store, &raw, &native),
                    |out| Ok(validate::diagnostics(out.into_iter().map(Diagnostic::from).collect(), limits)),
                )
            }
            ParserSlot::V0_3_0(slot) => {
                let raw = since_v0_3_0::w::SolverOutput::from(raw.clone());
                let native: Vec<_> = native.iter().cloned().map(since_v0_3_0::w::Diagnostic::from).collect();
                let limits = slot.limits();
                slot.call(
                    |b, store| b.call_parse(store, &raw, &native),
                    |out| Ok(validate::diagnostics(out.into_iter().map(Diagnostic::from).collect(), limits)),
                )
            }
        }
    }

    /// [`DiagnosticParser::review`] with the typed error. A parser built before 0.4.0 has no
    /// `review`: it answers nothing, without a call.
    pub fn try_review(&self, task_text: &str, candidate: &Spec, found: &[Diagnostic]) -> Result<Vec<Diagnostic>, PluginError> {
        let ParserSlot::Latest(slot) = &self.slot else { return Ok(Vec::new()) };
        let candidate = latest::types::Spec::from(candidate.clone());
        let found: Vec<_> = found.iter().cloned().map(latest::types::Diagnostic::from).collect();
        let limits = slot.limits();
        slot.call(
            |b, store| b.call_review(store, task_text, &candidate, &found),
            |out| validate::review(out.into_iter().map(Diagnostic::from).collect(), limits),
        )
    }
}

impl DiagnosticParser for WasmDiagnosticParser {
    fn parse(&self, raw: &SolverOutput, native: &[Diagnostic]) -> Result<Vec<Diagnostic>, BoxError> {
        self.try_parse(raw, native).map_err(boxed)
    }

    fn review(&self, task_text: &str, candidate: &Spec, found: &[Diagnostic]) -> Result<Vec<Diagnostic>, BoxError> {
        self.try_review(task_text, candidate, found).map_err(boxed)
    }
}

/// A `faithfulness-checker` plugin as a [`Checker`]. When its manifest has a `[budget]`,
/// each call's fuel and wall clock follow the reference task's size
/// ([`Limits::for_task`](crate::Limits::for_task)).
pub struct WasmChecker {
    slot: CheckerSlot,
    budget: Option<CallBudget>,
}

/// The bindings a checker is called through: 0.3.0's report (0.4.0's too) has `undecided`,
/// 0.1.0's and 0.2.0's (the same world) do not.
enum CheckerSlot {
    V0_2_0(Slot<since_v0_2_0::faithfulness_checker::FaithfulnessChecker>),
    Latest(Slot<fc::FaithfulnessChecker>),
}

impl WasmChecker {
    /// Wraps `plugin`, which must implement the `faithfulness-checker` world.
    pub fn new(plugin: &LoadedPlugin, policy: InstancePolicy) -> Result<Self, PluginError> {
        let slot = match plugin.api_version {
            ApiVersion::V0_1_0 | ApiVersion::V0_2_0 => CheckerSlot::V0_2_0(Slot::new(plugin, policy)?),
            ApiVersion::V0_3_0 | ApiVersion::V0_4_0 => CheckerSlot::Latest(Slot::new(plugin, policy)?),
        };
        Ok(WasmChecker { slot, budget: plugin.manifest.budget.clone() })
    }

    /// The limits a check of `reference` runs under.
    pub fn limits_for(&self, reference: &Spec) -> crate::Limits {
        let host = match &self.slot {
            CheckerSlot::V0_2_0(s) => s.limits(),
            CheckerSlot::Latest(s) => s.limits(),
        };
        match &self.budget {
            Some(b) => host.for_task(b, CallBudget::units(reference)),
            None => host.clone(),
        }
    }

    /// What the last call took (fuel, wall clock) and the limits it ran under.
    pub fn last_call(&self) -> Option<CallCost> {
        match &self.slot {
            CheckerSlot::V0_2_0(s) => s.last_call(),
            CheckerSlot::Latest(s) => s.last_call(),
        }
    }

    /// [`Checker::check`] with the typed error.
    pub fn try_check(
        &self,
        reference: &Spec,
        candidate: &Spec,
        plan: Option<&[String]>,
    ) -> Result<FaithfulnessReport, PluginError> {
        let plan: Option<Vec<String>> = plan.map(<[String]>::to_vec);
        let limits = self.limits_for(reference);
        match &self.slot {
            CheckerSlot::Latest(slot) => {
                let (r, c) = (latest::types::Spec::from(reference.clone()), latest::types::Spec::from(candidate.clone()));
                slot.call_with(
                    &limits,
                    |b, store| b.call_check(store, &r, &c, plan.as_deref()),
                    |out| validate::report(FaithfulnessReport::from(out), &limits),
                )
            }
            CheckerSlot::V0_2_0(slot) => {
                let (r, c) = (since_v0_2_0::spec(reference), since_v0_2_0::spec(candidate));
                slot.call_with(
                    &limits,
                    |b, store| b.call_check(store, &r, &c, plan.as_deref()),
                    |out| validate::report(since_v0_2_0::report(out), &limits),
                )
            }
        }
    }
}

impl Checker for WasmChecker {
    fn check(
        &self,
        reference: &Spec,
        candidate: &Spec,
        plan: Option<&[String]>,
    ) -> Result<FaithfulnessReport, BoxError> {
        self.try_check(reference, candidate, plan).map_err(boxed)
    }
}
