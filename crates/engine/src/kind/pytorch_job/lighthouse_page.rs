//! What a TorchFT Lighthouse reports of the quorum of a run's replica groups (see
//! [`super::replica_groups`]), read from its status page, and what the job's status shows of
//! it.

use eto_api::job_status::ReplicaGroupsStatus;

use crate::goodput::{ProgressSource, ReportedProgress};
use crate::group_report::{GroupReport, QuorumReport};

/// The path of the Lighthouse's status page.
pub const STATUS_PATH: &str = "/status";

/// How old a Manager's heartbeat is when it has stopped (they come every 100 ms by default).
const STOPPED: f64 = 5.0;

/// The report of a Lighthouse whose status page is `page`: its quorum (see [`read_status`]).
pub fn read(page: &str) -> Option<GroupReport> {
    let quorum = read_status(page)?;
    // The quorum's step is the training's progress (a quorum of none trains nothing).
    let progress = (quorum.participants > 0).then_some(ReportedProgress {
        step: quorum.step,
        at: None,
        first_step: None,
        first_at: None,
        total: None,
        restored: None,
        ended: None,
        source: ProgressSource::Lighthouse,
    });
    Some(GroupReport {
        quorum: Some(quorum),
        progress,
        ..GroupReport::default()
    })
}

/// The quorum the Lighthouse's status page `page` shows (TorchFT 0.2.0's: `Current
/// quorum_id: N`, the latest quorum's `Num participants: N` and each member's `Step: N`, and
/// `[N heartbeating]`); `None` if `page` is not one.
pub fn read_status(page: &str) -> Option<QuorumReport> {
    let number_after = |text: &str, label: &str| -> Option<i64> {
        let rest = &text[text.find(label)? + label.len()..];
        let digits: String = rest
            .trim_start()
            .chars()
            .take_while(char::is_ascii_digit)
            .collect();
        digits.parse().ok()
    };
    let quorum_id = number_after(page, "Current quorum_id:")?;
    let heartbeating = page
        .find(" heartbeating]")
        .and_then(|end| {
            let start = page[..end].rfind('[')? + 1;
            page[start..end].trim().parse().ok()
        })
        .unwrap_or(0);
    let previous = page
        .find("Previous Quorum")
        .map_or("", |start| &page[start..]);
    let previous = previous
        .find("Heartbeats")
        .map_or(previous, |end| &previous[..end]);
    let step = previous
        .match_indices("Step:")
        .filter_map(|(at, _)| number_after(&previous[at..], "Step:"))
        .max()
        .unwrap_or(0);
    // Each `<li class="heartbeat ...">ID: seen 0.013518943s ago</li>`, its class and text
    // spread over lines (`old` in the class of a stale one).
    let heartbeats = page
        .split("<li class=\"heartbeat")
        .skip(1)
        .filter_map(|item| {
            let item = &item[item.find('>')? + 1..];
            let item = item[..item.find("</li>")?].trim();
            let (id, seen) = item.rsplit_once(": seen ")?;
            Some((
                id.trim().to_string(),
                seconds(seen.trim().strip_suffix(" ago")?)?,
            ))
        })
        .collect();
    // `Next quorum status: New quorum not ready, only have P participants, need
    // min_replicas M [...]`: P groups asked for the next quorum, too few for it.
    let next = page
        .find("Next quorum status:")
        .map_or("", |start| &page[start..]);
    let next = &next[..next.find('\n').unwrap_or(next.len())];
    let waiting_for_groups = next.contains("need min_replicas")
        && number_after(next, "only have").is_some_and(|asked| asked > 0 && asked >= heartbeating);
    Some(QuorumReport {
        quorum_id,
        participants: number_after(previous, "Num participants:").unwrap_or(0),
        step,
        heartbeating,
        heartbeats,
        waiting_for_groups,
    })
}

/// Seconds in a duration as Rust's `Debug` writes it: `0.066504275s`, `12.5ms`, `65s`.
fn seconds(text: &str) -> Option<f64> {
    let split = text.find(|c: char| !(c.is_ascii_digit() || c == '.'))?;
    let (number, unit) = text.split_at(split);
    let number: f64 = number.parse().ok()?;
    let scale = match unit {
        "s" => 1.0,
        "ms" => 1e-3,
        "µs" | "us" => 1e-6,
        "ns" => 1e-9,
        _ => return None,
    };
    Some(number * scale)
}

/// The replica group a Manager's replica id names, by the number it ends with before its
/// `:<uuid>` (`train_3:1e62d685` is group 3), as eto's helper and examples name it from
/// `REPLICA_GROUP_ID`.
pub fn group_of_replica(replica_id: &str) -> Option<u32> {
    let id = replica_id.split(':').next()?;
    let digits = id.len() - id.trim_end_matches(|c: char| c.is_ascii_digit()).len();
    id[id.len() - digits..].parse().ok()
}

impl QuorumReport {
    /// The replica groups whose Managers' newest heartbeat is older than `grace`, with its
    /// age in seconds: groups that stopped without leaving (frozen, cut off).
    pub fn silent_groups(
        &self,
        grace: std::time::Duration,
    ) -> std::collections::BTreeMap<u32, f64> {
        let mut newest: std::collections::BTreeMap<u32, f64> = std::collections::BTreeMap::new();
        for (id, age) in &self.heartbeats {
            if let Some(group) = group_of_replica(id) {
                let entry = newest.entry(group).or_insert(*age);
                *entry = entry.min(*age);
            }
        }
        newest.retain(|_, age| *age > grace.as_secs_f64());
        newest
    }

    /// When to read the page again to see the next Manager go silent for longer than
    /// `grace`: within the grace, and when a Manager that stopped heartbeating (its
    /// heartbeat older than [`STOPPED`]) will be due; never sooner than in a second.
    pub fn next_silence_due(&self, grace: std::time::Duration) -> std::time::Duration {
        let stopped = self
            .heartbeats
            .iter()
            .map(|(_, age)| *age)
            .filter(|age| *age > STOPPED && *age <= grace.as_secs_f64())
            .map(|age| grace.as_secs_f64() - age + 1.0)
            .fold(grace.as_secs_f64(), f64::min);
        std::time::Duration::from_secs_f64(stopped.max(1.0))
    }

    /// The status of the replica groups of a run holding `groups` groups, whose Lighthouse
    /// reported this: a heartbeating group outside the quorum is healing, a group the job
    /// holds that does not heartbeat is missing.
    pub fn status(&self, groups: usize) -> ReplicaGroupsStatus {
        let groups = i64::try_from(groups).unwrap_or(i64::MAX);
        ReplicaGroupsStatus {
            quorum_id: self.quorum_id,
            quorum: self.participants,
            step: self.step,
            heartbeating: self.heartbeating,
            healing: (self.heartbeating - self.participants).max(0),
            missing: (groups - self.heartbeating).max(0),
            ..ReplicaGroupsStatus::default()
        }
    }
}

#[cfg(test)]
mod tests {
    use pretty_assertions::assert_eq;

    use super::*;

    /// The status page of TorchFT 0.2.0's Lighthouse, as the harness's served it: three
    /// groups in quorum 2 at step 12, and three heartbeating.
    const PAGE: &str = r#"
Current quorum_id: 2 <br>
Next quorum status: New quorum not ready, only have 0 participants, need min_replicas 2 [0/0 participants healthy][3 heartbeating][shrink_only=false]

<h3>Previous Quorum</h3>
Previous quorum id: 2 <br>
Num participants: 3 <br>
Quorum age:
0.148304832s
<div>
<div class="member">
  <b>eto_ft_0:1e62d685</b> <br/>
  Step: 12 <br/>
  Manager: http://ddp-worker-0:45569 <br/>
</div>
<div class="member">
  <b>eto_ft_1:c4654d35</b> <br/>
  Step: 11 <br/>
  Manager: http://ddp-worker-1:38119 <br/>
</div>
</div>
<h2>Heartbeats</h2>
<ul>
  <li class="heartbeat
    
  ">
    eto_ft_1:c4654d35: seen 0.066504275s ago
  </li>
</ul>"#;

    #[test]
    fn the_lighthouses_page_gives_the_quorum_and_the_groups_state() {
        let read = read_status(PAGE).unwrap();
        assert_eq!(
            read,
            QuorumReport {
                quorum_id: 2,
                participants: 3,
                step: 12,
                heartbeating: 3,
                heartbeats: vec![("eto_ft_1:c4654d35".into(), 0.066504275)],
                waiting_for_groups: false,
            }
        );
        let before_any = "Current quorum_id: 0 <br>\nNext quorum status: New quorum not ready [0/0 participants healthy][0 heartbeating]\n<h3>Previous Quorum</h3>\n<h2>Heartbeats</h2>";
        assert_eq!(read_status(before_any), Some(QuorumReport::default()));
        assert_eq!(read_status("<html>not a lighthouse</html>"), None);

        let cases = [
            ("all in quorum", 3, 3, 3, (0, 0)),
            ("one replaced, healing", 2, 3, 3, (1, 0)),
            ("one lost, not yet replaced", 2, 2, 3, (0, 1)),
        ];
        for (name, participants, heartbeating, groups, (healing, missing)) in cases {
            let quorum = QuorumReport {
                quorum_id: 4,
                participants,
                step: 7,
                heartbeating,
                heartbeats: Vec::new(),
                waiting_for_groups: false,
            };
            let status = quorum.status(groups);
            assert_eq!(
                (status.healing, status.missing),
                (healing, missing),
                "{name}"
            );
            assert_eq!((status.quorum, status.step), (participants, 7), "{name}");
        }
    }

    #[test]
    fn groups_that_all_wait_for_a_quorum_too_small_to_form_are_told_apart() {
        // The lines TorchFT 0.2.0's Lighthouse writes for its next quorum.
        let cases = [
            (
                "the one group left waits, the minimum is two",
                "New quorum not ready, only have 1 participants, need min_replicas 2 [1/1 participants healthy][1 heartbeating][shrink_only=false]",
                true,
            ),
            (
                "one group waits, another heartbeats without asking (it saves, or heals)",
                "New quorum not ready, only have 1 participants, need min_replicas 2 [1/1 participants healthy][2 heartbeating][shrink_only=false]",
                false,
            ),
            (
                "between quorums: nobody asked yet",
                "New quorum not ready, only have 0 participants, need min_replicas 2 [0/0 participants healthy][1 heartbeating][shrink_only=false]",
                false,
            ),
            (
                "enough groups, waiting for a straggler",
                "Valid quorum with 2 participants, waiting for 1 healthy but not participating stragglers due to join timeout [2/2 participants healthy][3 heartbeating][shrink_only=false]",
                false,
            ),
            (
                "too few of the groups alive for a majority",
                "New quorum not ready, only have 1 participants, need at least half of 3 healthy workers [1/1 participants healthy][3 heartbeating][shrink_only=false]",
                false,
            ),
            (
                "a quorum forms",
                "Fast quorum found! [2/2 participants healthy][2 heartbeating][shrink_only=false]",
                false,
            ),
        ];
        for (name, status, waiting) in cases {
            let page = format!(
                "Current quorum_id: 7 <br>\nNext quorum status: {status}\n\n<h3>Previous Quorum</h3>\nNum participants: 2 <br>\n"
            );
            let report = read_status(&page).unwrap();
            assert_eq!(report.waiting_for_groups, waiting, "{name}");
        }
    }

    #[test]
    fn groups_whose_managers_stopped_heartbeating_are_told_apart() {
        // As TorchFT 0.2.0's Lighthouse writes its list (a stale heartbeat's class has `old`).
        let item = |class: &str, text: &str| {
            format!("\n  <li class=\"heartbeat\n    {class}\n  \">\n    {text}\n  </li>\n")
        };
        let page = format!(
            "<h2>Heartbeats</h2>\n\n<ul>\n{}{}{}{}{}</ul>",
            item("", "train_0:aa: seen 0.3s ago"),
            item("old", "train_1:bb: seen 75.2s ago"),
            item("old", "train_2:cc: seen 95s ago"),
            item("", "train_2:dd: seen 12.5ms ago"),
            item("old", "train:ee: seen 99s ago"),
        );
        let report = read_status(&format!(
            "Current quorum_id: 3 <br>\n[2 heartbeating]\n{page}"
        ))
        .unwrap();
        assert_eq!(report.heartbeats.len(), 5);
        assert_eq!(
            report.silent_groups(std::time::Duration::from_secs(60)),
            std::collections::BTreeMap::from([(1, 75.2)]),
            "group 2's new Manager heartbeats; an id without a group number names none"
        );
        assert_eq!(group_of_replica("eto_ft_12:c4654d35"), Some(12));
        assert_eq!(group_of_replica("spare"), None);
        assert_eq!(seconds("1.5µs"), Some(1.5e-6));
        assert_eq!(seconds("soon"), None);
    }
}
