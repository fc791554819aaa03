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

/// `span` before `at`, or the earliest time there is when that is before it.
pub fn before(at: jiff::Timestamp, span: Duration) -> jiff::Timestamp {
    jiff::SignedDuration::try_from(span)
        .ok()
        .and_then(|span| at.checked_sub(span).ok())
        .unwrap_or(jiff::Timestamp::MIN)
}

/// `at` as a Kubernetes `Time` keeps it in a status: in whole seconds, the fraction dropped. A
/// time the status shows is cut so before it is compared with one read back from there.
pub fn as_stored(at: jiff::Timestamp) -> jiff::Timestamp {
    jiff::Timestamp::from_second(at.as_second()).unwrap_or(at)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_stored_time_keeps_whole_seconds() {
        let at: jiff::Timestamp = "2027-01-15T08:01:02.93Z".parse().unwrap();
        assert_eq!(as_stored(at).to_string(), "2027-01-15T08:01:02Z");
        let stored = k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(at);
        let read_back: k8s_openapi::apimachinery::pkg::apis::meta::v1::Time =
            serde_json::from_value(serde_json::to_value(&stored).unwrap()).unwrap();
        assert_eq!(read_back.0, as_stored(at), "as the API keeps it");
    }

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

    #[test]
    fn a_span_before_the_first_time_ends_there() {
        let now = jiff::Timestamp::from_second(1_800_000_000).unwrap();
        assert_eq!(
            before(now, Duration::from_secs(60)),
            jiff::Timestamp::from_second(1_799_999_940).unwrap()
        );
        assert_eq!(before(now, Duration::MAX), jiff::Timestamp::MIN);
    }
}
