//! What a hub keeps: the families it knows and the latest snapshots per source.

use std::collections::{BTreeMap, HashSet};
use std::time::Instant;

use pipetel_recorders::{merge, Envelope, Family, Kind, MetricSnapshot};

use super::config::HubConfig;
use super::outcome::{HubError, Ingested};
use super::view::{build_view, View};

pub(super) struct SourceState {
    pub(super) sequence: u64,
    pub(super) last_accepted: Instant,
    /// The latest snapshot per family name.
    latest: BTreeMap<String, MetricSnapshot>,
    /// Counter and histogram totals of earlier runs of this source, per family name.
    carried: BTreeMap<String, MetricSnapshot>,
    pub(super) restarts: u64,
}

pub(super) struct FamilyEntry {
    pub(super) family: Family,
    /// Bumped whenever a snapshot of this family changes in any source.
    generation: u64,
    view: Option<View>,
}

pub(super) struct State {
    pub(super) config: HubConfig,
    pub(super) families: BTreeMap<String, FamilyEntry>,
    pub(super) sources: BTreeMap<String, SourceState>,
}

impl State {
    pub(super) fn new(config: HubConfig) -> State {
        State { config, families: BTreeMap::new(), sources: BTreeMap::new() }
    }

    pub(super) fn is_stale(&self, source: &SourceState, now: Instant) -> bool {
        now.saturating_duration_since(source.last_accepted) > self.config.stale_after
    }

    /// Validates, then applies. Returns the outcome and the families seen for the first time.
    pub(super) fn ingest(
        &mut self,
        envelope: Envelope,
        new_stream: bool,
        now: Instant,
    ) -> Result<(Ingested, Vec<Family>), HubError> {
        let new_families = self.validate(&envelope)?;
        let Envelope { source: id, sequence, snapshots } = envelope;
        let outcome = match self.sources.get(&id) {
            None => Ingested::Accepted,
            Some(source) => {
                let regressed = snapshots
                    .iter()
                    .any(|s| source.latest.get(s.name()).is_some_and(|earlier| s.is_reset_from(earlier)));
                if sequence > source.sequence {
                    if regressed {
                        Ingested::Restarted
                    } else {
                        Ingested::Accepted
                    }
                } else if new_stream && regressed {
                    Ingested::Restarted
                } else if sequence == source.sequence {
                    Ingested::Duplicate
                } else {
                    Ingested::Superseded
                }
            }
        };
        // Nothing is registered before the envelope is known to be applied.
        for family in &new_families {
            self.families
                .insert(family.name().to_owned(), FamilyEntry { family: family.clone(), generation: 0, view: None });
        }
        let mut touched: Vec<String> = snapshots.iter().map(|s| s.name().to_owned()).collect();
        match outcome {
            Ingested::Superseded | Ingested::Duplicate => return Ok((outcome, new_families)),
            Ingested::Accepted => {
                let source = self.sources.entry(id).or_insert_with(|| SourceState {
                    sequence,
                    last_accepted: now,
                    latest: BTreeMap::new(),
                    carried: BTreeMap::new(),
                    restarts: 0,
                });
                source.sequence = sequence;
                source.last_accepted = now;
                for snapshot in snapshots {
                    source.latest.insert(snapshot.name().to_owned(), snapshot);
                }
            }
            Ingested::Restarted => {
                let Some(source) = self.sources.get_mut(&id) else { return Ok((outcome, new_families)) };
                let previous = std::mem::take(&mut source.latest);
                for (name, snapshot) in previous {
                    touched.push(name.clone());
                    if snapshot.kind() == Kind::Gauge {
                        continue;
                    }
                    let total = match source.carried.remove(&name) {
                        // Same family object (the catalog's), so merging cannot fail; should it,
                        // keeping the larger run's totals is the least wrong answer.
                        Some(carried) => merge(snapshot.family(), &[carried, snapshot.clone()]).unwrap_or(snapshot),
                        None => snapshot,
                    };
                    source.carried.insert(name, total);
                }
                for snapshot in snapshots {
                    source.latest.insert(snapshot.name().to_owned(), snapshot);
                }
                source.sequence = sequence;
                source.last_accepted = now;
                source.restarts += 1;
            }
        }
        for name in touched {
            if let Some(entry) = self.families.get_mut(&name) {
                entry.generation += 1;
            }
        }
        Ok((outcome, new_families))
    }

    /// Checks an envelope against the catalog and the limits; returns the families it would add.
    fn validate(&self, envelope: &Envelope) -> Result<Vec<Family>, HubError> {
        let id = &envelope.source;
        if !self.sources.contains_key(id) && self.sources.len() >= self.config.max_sources {
            return Err(HubError::TooManySources { source_id: id.clone(), limit: self.config.max_sources });
        }
        let mut seen: HashSet<&str> = HashSet::new();
        let mut new_families = Vec::new();
        for snapshot in &envelope.snapshots {
            let family = snapshot.family();
            if !seen.insert(family.name()) {
                return Err(HubError::DuplicateFamily { source_id: id.clone(), family: family.name().to_owned() });
            }
            match self.families.get(family.name()) {
                Some(known) if known.family.compatible_with(family) => {}
                Some(known) => {
                    return Err(HubError::FamilyConflict {
                        source_id: id.clone(),
                        family: family.name().to_owned(),
                        expected: describe(&known.family),
                        found: describe(family),
                    })
                }
                None => {
                    if self.families.len() + new_families.len() >= self.config.max_families {
                        return Err(HubError::TooManyFamilies {
                            source_id: id.clone(),
                            family: family.name().to_owned(),
                            limit: self.config.max_families,
                        });
                    }
                    new_families.push(family.clone());
                }
            }
        }
        Ok(new_families)
    }

    /// The family's current view, rebuilt when its inputs changed.
    pub(super) fn view(&mut self, name: &str, now: Instant) -> Option<&View> {
        let stale_after = self.config.stale_after;
        let entry = self.families.get_mut(name)?;
        let gauge = entry.family.kind() == Kind::Gauge;
        let live: Vec<String> = if gauge {
            self.sources
                .iter()
                .filter(|(_, s)| now.saturating_duration_since(s.last_accepted) <= stale_after)
                .map(|(id, _)| id.clone())
                .collect()
        } else {
            Vec::new()
        };
        let fresh = entry.view.as_ref().is_some_and(|v| v.generation == entry.generation && v.live == live);
        if !fresh {
            let mut inputs = Vec::new();
            for (id, source) in &self.sources {
                if gauge {
                    if live.binary_search(id).is_ok() {
                        inputs.extend(source.latest.get(name).cloned());
                    }
                } else {
                    inputs.extend(source.carried.get(name).cloned());
                    inputs.extend(source.latest.get(name).cloned());
                }
            }
            // Every input passed `compatible_with` against this family on intake.
            let merged = merge(&entry.family, &inputs).unwrap_or_else(|_| MetricSnapshot::empty(entry.family.clone()));
            let previous = entry.view.take();
            entry.view = Some(build_view(&entry.family, merged, previous, live, entry.generation));
        }
        entry.view.as_ref()
    }
}

fn describe(family: &Family) -> String {
    let mut s = format!("a {} in {:?} with labels {:?}", family.kind(), family.unit(), family.label_names());
    if family.kind() == Kind::Histogram {
        s.push_str(&format!(" and bounds {:?}", family.bounds()));
    }
    s
}
