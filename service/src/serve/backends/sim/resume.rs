//! Where the replay continues when the service restarts on a store the simulator already
//! wrote to: at the lap after the highest one whose job ids the store holds (so no replayed
//! id is submitted a second time) and after the store's clock (so the replayed events stay
//! in time order with the ones before the restart).

use augur_datasets::JobRecord;

use crate::serve::state::online::Online;

/// Seconds between the store's last event and the resumed replay's first submit.
const GAP_S: f64 = 60.0;

/// See the [module docs](self).
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Resume {
    /// Added to the simulator's lap in the replayed jobs' ids (`sim<lap>-<trace id>`).
    pub lap: u32,
    /// The store's clock: the replay starts [`GAP_S`] after it.
    pub after: Option<f64>,
}

impl Resume {
    /// The resume point of the replay over the store `online` was rebuilt from.
    pub fn of(online: &Online) -> Resume {
        let lap = online
            .jobs
            .keys()
            .chain(online.earlier_runs.keys())
            .filter_map(|id| {
                id.strip_prefix("sim")?
                    .split_once('-')?
                    .0
                    .parse::<u32>()
                    .ok()
            })
            .max()
            .map_or(0, |l| l.saturating_add(1));
        Resume {
            lap,
            after: online.clock,
        }
    }

    /// Shifts `records` (in submit order) so the first is submitted [`GAP_S`] after the
    /// store's clock, when it would come before.
    pub fn shift(&self, records: &mut [JobRecord]) {
        let (Some(after), Some(first)) = (self.after, records.first().map(|r| r.submit_time))
        else {
            return;
        };
        let by = after + GAP_S - first;
        if by <= 0.0 {
            return;
        }
        for r in records {
            r.submit_time += by;
            r.start_time = r.start_time.map(|t| t + by);
            r.end_time = r.end_time.map(|t| t + by);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::serve::state::events::{Event, JobProfile};
    use crate::serve::state::online::ServedModels;
    use crate::serve::state::store::StoredEvent;

    #[test]
    fn a_restarted_replay_takes_new_ids_after_the_stores_clock() {
        let mut online = Online::new(ServedModels::default());
        assert_eq!(Resume::of(&online), Resume::default(), "a fresh store");
        let submit = |seq, id: &str, at| StoredEvent {
            seq,
            received_at: 0.0,
            event: Event::JobSubmitted {
                job_id: id.to_string(),
                at,
                profile: JobProfile {
                    num_gpus: Some(1.0),
                    ..JobProfile::default()
                },
                dag: None,
            },
        };
        online.apply(&submit(1, "sim0-philly-1", 100.0));
        online.apply(&submit(2, "sim2-philly-7", 5000.0));
        online.apply(&submit(3, "client-job", 6000.0));
        let resume = Resume::of(&online);
        assert_eq!(resume.lap, 3);
        assert_eq!(resume.after, Some(6000.0));
        let mut records: Vec<JobRecord> = [10.0, 20.0]
            .map(|t| JobRecord {
                submit_time: t,
                end_time: Some(t + 5.0),
                ..JobRecord::default()
            })
            .to_vec();
        resume.shift(&mut records);
        assert_eq!(records[0].submit_time, 6060.0);
        assert_eq!(records[1].submit_time, 6070.0);
        assert_eq!(records[1].end_time, Some(6075.0));
    }
}
