//! Arithmetic on times that cannot fail.

use std::time::Duration;

/// `span` after `at`, or the latest time there is when that is beyond it (a deadline of
/// `activeDeadlineSeconds: 9223372036854775807` never comes, rather than overflowing).
pub fn after(at: jiff::Timestamp, span: Duration) -> jiff::Timestamp {
    jiff::SignedDuration::try_from(span)
        .ok()
        .and_then(|span| at.checked_add(span).ok())
        .unwrap_or(jiff::Timestamp::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_span_beyond_the_last_time_ends_there() {
        let now = jiff::Timestamp::from_second(1_800_000_000).unwrap();
        assert_eq!(
            after(now, Duration::from_secs(60)),
            jiff::Timestamp::from_second(1_800_000_060).unwrap()
        );
        assert_eq!(
            after(now, Duration::from_secs(251_602_207_201)),
            jiff::Timestamp::MAX
        );
        assert_eq!(after(now, Duration::MAX), jiff::Timestamp::MAX);
    }
}
