//! The job model every layer of the engine shares: a kind of job ([`Kind`], its
//! [`Vocabulary`]), a job of any kind as the rules read it ([`JobRef`], through the
//! [`ServedJob`] its kind implements), a valid job as the builders take it ([`JobContext`]),
//! what a kind builds a launcher from and what validation reports ([`InvalidSpec`]).
//!
//! It names no kind: each kind's module (under `crate::kind`) implements these, and the
//! registry there lists the kinds.

pub mod context;
pub mod invalid_spec;
pub mod kind;
pub mod launcher;
pub mod served;

pub use context::{JobContext, Role, merged};
pub use invalid_spec::InvalidSpec;
pub use kind::{Coordinator, Kind, Reference, Referenced, Vocabulary, WorkerNames};
pub use served::{
    FailedSurvivor, GroupLosses, GroupedWorkers, JobRef, Preparation, PreparationStep,
    ReportingCoordinator, ServedJob, ShownGroups, SilentGroups, StepReached, controlled_by,
};
