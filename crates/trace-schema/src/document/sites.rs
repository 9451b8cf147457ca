//! The allocation sites of a loaded trace (trace/13): [`SiteTable`], beside the
//! [`super::SampleTable`] whose stacks the sites refer to.
//!
//! The compact memory record stays as it is: the few events that carry a site are listed here
//! by their memory index ([`StorageSite`], sorted by index), so the table costs nothing on
//! traces without sites and 16 bytes per storage-sized allocation on traces with them.
//!
//! Memory events are written before the sites they name (see [`crate::sites`]), so the builder
//! keeps each event's wire site id pending and resolves it at the end of the load. A site id
//! never defined, a site naming a stack not defined before it, a repeated site id, a second
//! `alloc_sites` account, a site on a free event and an account that breaks its own rules are
//! [`super::SemanticCode::InvalidSites`] issues (with the line); the offending record is
//! dropped (a memory event keeps no site), the rest stays usable.

use rustc_hash::FxHashMap as HashMap;

use crate::sites::{AllocSitesEvent, SiteEvent};

/// Undefined site ids named one by one in the load's issues; the rest are counted in one line.
const UNDEFINED_SITES_NAMED: usize = 16;

/// One site, compact: its stack is an index into [`super::SampleTable::stacks`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SiteRecord {
    /// The site's wire id.
    pub id: u32,
    /// Index into [`super::SampleTable::stacks`] (innermost frame first).
    pub stack: u32,
}

/// The site of one memory event (an alloc), resolved.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StorageSite {
    /// The memory event's index ([`super::MemoryItem::index`], file order).
    pub memory: u32,
    /// Index into [`SiteTable::sites`].
    pub site: u32,
    /// The allocating thread's key (the key samples use), when recorded.
    pub thread: Option<u64>,
}

/// A memory event's site as read, resolved at the end of the load.
#[derive(Debug, Clone, Copy)]
struct Pending {
    memory: u32,
    site: u32,
    thread: Option<u64>,
    line: u64,
}

/// The allocation sites of a trace. Empty for traces before trace/13 and for traces captured
/// without sites.
#[derive(Debug, Clone, Default)]
pub struct SiteTable {
    /// The sites, in file order.
    pub sites: Vec<SiteRecord>,
    /// The capture's account (the first one, if several).
    pub account: Option<AllocSitesEvent>,
    /// The memory events that carry a site, sorted by memory index (filled at the end of the
    /// load).
    pub storages: Vec<StorageSite>,
    site_index: HashMap<u32, u32>,
    pending: Vec<Pending>,
}

impl SiteTable {
    /// True when the trace has no site, no account and no memory event naming a site.
    pub fn is_empty(&self) -> bool {
        self.sites.is_empty() && self.account.is_none() && self.storages.is_empty()
    }

    /// The site of memory event `memory` (its [`super::MemoryItem::index`]), if it carries
    /// one. O(log n).
    pub fn of_memory(&self, memory: u32) -> Option<&StorageSite> {
        self.storages
            .binary_search_by_key(&memory, |s| s.memory)
            .ok()
            .map(|i| &self.storages[i])
    }

    /// The stack index (into [`super::SampleTable::stacks`]) of site index `site`.
    pub fn stack_of(&self, site: u32) -> Option<u32> {
        self.sites.get(site as usize).map(|s| s.stack)
    }

    /// Adds a site; `Err` when its id repeats or its stack is not defined. `stack_index` maps
    /// a stack's wire id to its index in the sample table (only stacks read so far).
    pub(crate) fn push_site(
        &mut self,
        site: SiteEvent,
        stack_index: impl FnOnce(u32) -> Option<u32>,
    ) -> Result<(), String> {
        if self.site_index.contains_key(&site.id) {
            return Err(format!("site id {} repeats (the first is kept)", site.id));
        }
        let Some(stack) = stack_index(site.stack_id) else {
            return Err(format!(
                "site {} names stack {}, which no earlier `stack` defines (or one that was rejected)",
                site.id, site.stack_id
            ));
        };
        let index = u32::try_from(self.sites.len()).map_err(|_| "too many sites".to_string())?;
        self.site_index.insert(site.id, index);
        self.sites.push(SiteRecord { id: site.id, stack });
        Ok(())
    }

    /// Sets the account; `Err` when one was already read.
    pub(crate) fn set_account(&mut self, account: AllocSitesEvent) -> Result<(), String> {
        if self.account.is_some() {
            return Err("a second `alloc_sites` event (the first is kept)".to_string());
        }
        self.account = Some(account);
        Ok(())
    }

    /// Notes memory event `memory` (read on `line`) naming wire site `site`, resolved by
    /// [`Self::resolve`].
    pub(crate) fn push_pending(&mut self, memory: u32, site: u32, thread: Option<u64>, line: u64) {
        self.pending.push(Pending {
            memory,
            site,
            thread,
            line,
        });
    }

    /// Resolves the pending memory sites once the trace is read. Returns `(line, problem)` for
    /// every site id no `site` defines (that event keeps no site; one line per id, at most
    /// [`UNDEFINED_SITES_NAMED`] ids, then one line for the rest — or a single line when the
    /// trace is `cut_short` before its account), and a count mismatch against the account.
    pub(crate) fn resolve(&mut self, account_line: u64, cut_short: bool) -> Vec<(u64, String)> {
        let mut problems = Vec::new();
        let pending = std::mem::take(&mut self.pending);
        self.storages.reserve_exact(pending.len());
        // Undefined ids, each with its first line and its count: one problem per id (a trace
        // cut short before its site table names thousands of events), at most
        // `UNDEFINED_SITES_NAMED` ids, then one line for the rest.
        let mut undefined: HashMap<u32, (u64, u64)> = HashMap::default();
        for p in pending {
            match self.site_index.get(&p.site) {
                Some(&site) => self.storages.push(StorageSite {
                    memory: p.memory,
                    site,
                    thread: p.thread,
                }),
                None => {
                    let entry = undefined.entry(p.site).or_insert((p.line, 0));
                    entry.1 += 1;
                }
            }
        }
        let mut undefined: Vec<(u32, (u64, u64))> = undefined.into_iter().collect();
        undefined.sort_unstable_by_key(|&(site, (line, _))| (line, site));
        if cut_short && self.account.is_none() && !undefined.is_empty() {
            // The site table and its account come after the captured step: a trace cut short
            // before them names sites it never defines. One line says so.
            let events: u64 = undefined.iter().map(|(_, (_, n))| n).sum();
            problems.push((
                undefined[0].1 .0,
                format!(
                    "{events} memory events name {} allocation sites the trace never defines: it was cut short before its site table (written after the captured step), so they keep no site",
                    undefined.len()
                ),
            ));
            undefined.clear();
        }
        for &(site, (line, events)) in undefined.iter().take(UNDEFINED_SITES_NAMED) {
            let more = match events {
                1 => String::new(),
                n => format!(" (and {} later memory events)", n - 1),
            };
            problems.push((
                line,
                format!(
                    "memory event names site {site}{more}, which no `site` defines (or one that was rejected; a trace cut short before its site table has none): it keeps no site"
                ),
            ));
        }
        if let Some(&(_, (line, _))) = undefined.get(UNDEFINED_SITES_NAMED) {
            let rest = &undefined[UNDEFINED_SITES_NAMED..];
            let events: u64 = rest.iter().map(|(_, (_, n))| n).sum();
            problems.push((
                line,
                format!(
                    "{} more undefined site ids, named by {events} memory events from this line on: they keep no site",
                    rest.len()
                ),
            ));
        }
        // Events are numbered in the order added: already sorted, but a sort keeps the
        // binary search's contract whatever the builder does.
        if !self.storages.windows(2).all(|w| w[0].memory < w[1].memory) {
            self.storages.sort_unstable_by_key(|s| s.memory);
            self.storages.dedup_by_key(|s| s.memory);
        }
        if let Some(account) = &self.account {
            if account.sites != self.sites.len() as u64 {
                problems.push((
                    account_line,
                    format!(
                        "alloc_sites counts {} sites, the trace holds {}",
                        account.sites,
                        self.sites.len()
                    ),
                ));
            }
        }
        problems
    }

    /// Releases growth slack.
    pub(crate) fn shrink_to_fit(&mut self) {
        self.sites.shrink_to_fit();
        self.storages.shrink_to_fit();
        self.site_index.shrink_to_fit();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn undefined_sites_are_said_once_per_id_and_bounded() {
        let mut t = SiteTable::default();
        // 3,000 events naming site 5 (as a trace cut short before its site table does), then
        // 40 more ids named twice each.
        for i in 0..3_000u32 {
            t.push_pending(i, 5, Some(1), 10 + u64::from(i));
        }
        for id in 0..40u32 {
            for k in 0..2u32 {
                t.push_pending(
                    3_000 + 2 * id + k,
                    100 + id,
                    Some(1),
                    5_000 + u64::from(2 * id + k),
                );
            }
        }
        let problems = t.resolve(0, false);
        assert_eq!(problems.len(), UNDEFINED_SITES_NAMED + 1, "{problems:#?}");
        assert_eq!(problems[0].0, 10);
        assert!(
            problems[0]
                .1
                .contains("site 5 (and 2999 later memory events)"),
            "{problems:?}"
        );
        assert!(
            problems[1].1.contains("site 100 (and 1 later"),
            "{problems:?}"
        );
        let rest = &problems[UNDEFINED_SITES_NAMED];
        assert_eq!(rest.0, 5_000 + 2 * (UNDEFINED_SITES_NAMED as u64 - 1));
        assert!(
            rest.1
                .starts_with("25 more undefined site ids, named by 50 memory events"),
            "{rest:?}"
        );
        assert!(t.storages.is_empty());
    }

    #[test]
    fn a_trace_cut_short_before_its_site_table_says_so_once() {
        let mut t = SiteTable::default();
        for i in 0..300u32 {
            t.push_pending(i, i / 2, Some(1), 40 + u64::from(i));
        }
        let problems = t.resolve(0, true);
        assert_eq!(problems.len(), 1, "{problems:#?}");
        assert_eq!(problems[0].0, 40);
        assert!(
            problems[0].1.starts_with("300 memory events name 150 allocation sites the trace never defines: it was cut short"),
            "{problems:?}"
        );
    }

    #[test]
    fn sites_resolve_at_the_end_and_undefined_ids_are_named() {
        let mut t = SiteTable::default();
        t.push_pending(0, 7, Some(1), 2);
        t.push_pending(3, 9, None, 5);
        t.push_site(SiteEvent { id: 7, stack_id: 4 }, |s| (s == 4).then_some(0))
            .unwrap();
        let problems = t.resolve(0, false);
        assert_eq!(problems.len(), 1);
        assert_eq!(problems[0].0, 5);
        assert!(problems[0].1.contains("site 9"), "{problems:?}");
        assert_eq!(
            t.of_memory(0).map(|s| (s.site, s.thread)),
            Some((0, Some(1)))
        );
        assert!(t.of_memory(3).is_none());
        assert_eq!(t.stack_of(0), Some(0));
    }

    #[test]
    fn a_site_before_its_stack_and_a_repeated_id_are_rejected() {
        let mut t = SiteTable::default();
        let e = t.push_site(SiteEvent { id: 1, stack_id: 2 }, |_| None);
        assert!(e.unwrap_err().contains("stack 2"));
        t.push_site(SiteEvent { id: 1, stack_id: 2 }, |_| Some(0))
            .unwrap();
        let e = t.push_site(SiteEvent { id: 1, stack_id: 2 }, |_| Some(0));
        assert!(e.unwrap_err().contains("repeats"));
        assert_eq!(t.sites.len(), 1);
    }
}
