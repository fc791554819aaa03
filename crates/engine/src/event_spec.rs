//! An Event about a job, as data: the planner and the hooks of the kinds compute them, the
//! controller records them.

/// An event about the job.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct EventSpec {
    /// Warning rather than Normal.
    pub warning: bool,
    /// CamelCase reason.
    pub reason: String,
    /// What eto did: `Create`, `Delete`, `Restart`, `Fail`, `Validate`, ...
    pub action: String,
    /// Human-readable note.
    pub note: String,
}

impl EventSpec {
    /// An event with reason `reason`, action `action` and note `note`; a Warning when
    /// `warning`.
    pub fn new(warning: bool, reason: &str, action: &str, note: String) -> Self {
        Self {
            warning,
            reason: reason.into(),
            action: action.into(),
            note,
        }
    }
}
