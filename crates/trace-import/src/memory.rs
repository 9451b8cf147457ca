//! `[memory]` events → the logical plane (storage lifetimes) and the physical plane (PyTorch's
//! `Total Allocated` / `Total Reserved` counters).
//!
//! Rules:
//! - events apply in (timestamp, file order): file order inside one timestamp is the
//!   allocator's order;
//! - identity is (process, device, address); each allocation of an address starts a new
//!   lifetime, `storage_id` = `<address hex>.<generation>` (the probe's form), prefixed with
//!   `p<pid>.` when several processes wrote `[memory]` events (traces of several ranks merged
//!   into one file reuse the same device addresses: one rank's free never ends another's
//!   block);
//! - a device several processes share gets the sum of their storages (the logical plane) and
//!   no device samples: `Total Allocated` is one process's counter, not the device's; the
//!   import report gives each process's replay and counter, and the combined replay;
//! - a free of an address never allocated in the window is memory from before the capture: a
//!   `pre_existing` alloc of its size at the window start, then the free — never a negative;
//! - an address allocated again while live lost its free: the earlier lifetime ends at the new
//!   allocation (counted as an inferred free); a second free of a freed address stays an
//!   unmatched free;
//! - each event is attributed to the innermost span enclosing it on its thread
//!   (`[start, end)`), `op_name` the innermost enclosing op span; outside every span, to the
//!   thread's home span;
//! - `Total Allocated` becomes `used_bytes` of a device sample after each event; `Total
//!   Reserved` its `reserved_bytes` on accelerators (PyTorch writes 0 on the CPU, which has no
//!   reservation: not observed, so absent).
//!
//! The import replays the lifetimes once more, reading live bytes after every event, to compare
//! with `Total Allocated` (see [`crate::report::DeviceMemoryImport`]).

use std::collections::{BTreeMap, HashMap};

use trace_schema::SpanKind;

use crate::collect::Collected;
use crate::report::{DeviceMemoryImport, ImportReport, MemoryImport};
use crate::tree::Tree;

/// What one imported memory record says, before it becomes a `MemoryEvent`.
#[derive(Debug, Clone)]
pub(crate) struct MemOut {
    pub ts: i128,
    pub alloc: bool,
    pub device: String,
    /// The process, when several processes wrote `[memory]` events.
    pub process: Option<String>,
    pub storage_id: String,
    pub bytes: u64,
    /// Node index of the span it happened in.
    pub span: u32,
    /// Name of the innermost enclosing op span.
    pub op_name: Option<String>,
    pub pre_existing: bool,
    /// Change of the device's live bytes (a free removes its allocation's size; an unmatched
    /// free removes nothing).
    pub live_delta: i128,
    /// Device sample written right after this event: (used, reserved).
    pub sample: Option<(Option<u64>, Option<u64>)>,
}

#[derive(Default)]
struct AddrState {
    live: Option<(u32, u64)>,
    next_generation: u32,
}

fn storage_id(process: Option<&str>, addr: u64, generation: u32) -> String {
    match process {
        Some(p) => format!("p{p}.{addr:x}.{generation}"),
        None => format!("{addr:x}.{generation}"),
    }
}

/// Innermost span (node index) enclosing each memory event, by a sweep per thread.
fn attribute(c: &Collected, tree: &Tree, sorted: &[usize]) -> Vec<u32> {
    let mut per_thread: Vec<Vec<u32>> = vec![Vec::new(); c.threads.len()];
    for &i in &tree.order {
        let n = &c.nodes[i as usize];
        if let (Some(t), false) = (
            n.thread,
            matches!(n.class, crate::collect::NodeClass::Thread),
        ) {
            per_thread[t as usize].push(i);
        }
    }
    let mut out = vec![0u32; c.mems.len()];
    let mut stacks: Vec<Vec<u32>> = vec![Vec::new(); c.threads.len()];
    let mut next: Vec<usize> = vec![0; c.threads.len()];
    for &m in sorted {
        let mem = &c.mems[m];
        let Some(t) = mem.thread.map(|t| t as usize) else {
            continue;
        };
        let (list, stack, k) = (&per_thread[t], &mut stacks[t], &mut next[t]);
        while *k < list.len() && c.nodes[list[*k] as usize].start <= mem.ts {
            let s = list[*k];
            let start = c.nodes[s as usize].start;
            while stack
                .last()
                .is_some_and(|&top| c.nodes[top as usize].end <= start)
            {
                stack.pop();
            }
            stack.push(s);
            *k += 1;
        }
        while stack
            .last()
            .is_some_and(|&top| c.nodes[top as usize].end <= mem.ts)
        {
            stack.pop();
        }
        out[m] = match stack.last() {
            Some(&s) => s,
            None => tree.thread_home.get(t).copied().unwrap_or(0),
        };
    }
    out
}

/// The innermost op at or above each node (pre-order inheritance: O(n), no walk per event).
fn nearest_ops(c: &Collected, tree: &Tree) -> Vec<Option<u32>> {
    let mut out: Vec<Option<u32>> = vec![None; c.nodes.len()];
    for &i in &tree.order {
        let n = &c.nodes[i as usize];
        out[i as usize] = if n.kind == SpanKind::Op {
            Some(i)
        } else {
            n.parent.and_then(|p| out[p as usize])
        };
    }
    out
}

/// Converts the memory events; `None` when there are none.
pub(crate) fn convert(
    c: &Collected,
    tree: &Tree,
    report: &mut ImportReport,
) -> Option<Vec<MemOut>> {
    if c.mems.is_empty() {
        return None;
    }
    let mut sorted: Vec<usize> = (0..c.mems.len()).collect();
    sorted.sort_by_key(|&i| (c.mems[i].ts, c.mems[i].file));
    let mut summary = MemoryImport::default();
    let processes = processes(c);
    let several = processes.len() > 1;
    if several {
        summary.processes = processes.iter().map(|p| p.to_string()).collect();
    }
    let users = device_users(c);
    // Devices written by several processes: no device samples (the counter is per process).
    let shared: Vec<&str> = users
        .iter()
        .filter(|(_, ps)| several && ps.len() > 1)
        .map(|(d, _)| *d)
        .collect();
    let (mut pre, mut body) = replay(c, tree, &sorted, several, &mut summary);
    summary.devices = cross_check(&pre, &body, &shared);
    for e in &mut body {
        if shared.contains(&e.device.as_str()) {
            e.sample = None;
        }
    }
    warn_shared(report, &users, &shared);
    warn_summary(report, &summary);
    report.memory = Some(summary);
    pre.extend(body);
    Some(pre)
}

/// The processes that wrote `[memory]` events, sorted, each once.
fn processes(c: &Collected) -> Vec<&str> {
    let mut processes: Vec<&str> = c.mems.iter().filter_map(|m| m.process.as_deref()).collect();
    processes.sort_unstable();
    processes.dedup();
    processes
}

/// The processes (`?` when unnamed) writing each device's `[memory]` events, in first-seen order.
fn device_users(c: &Collected) -> BTreeMap<&str, Vec<&str>> {
    let mut users: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
    for m in &c.mems {
        let list = users.entry(m.device.as_str()).or_default();
        let p = m.process.as_deref().unwrap_or("?");
        if !list.contains(&p) {
            list.push(p);
        }
    }
    users
}

/// Replays the records (indices into `c.mems`, in time order) per address: the storages alive
/// before the window (`pre`, at the window start) and the window's allocs and frees (`body`),
/// counting them in `summary`.
fn replay(
    c: &Collected,
    tree: &Tree,
    sorted: &[usize],
    several: bool,
    summary: &mut MemoryImport,
) -> (Vec<MemOut>, Vec<MemOut>) {
    let spans = attribute(c, tree, sorted);
    let ops = nearest_ops(c, tree);
    let origin = c.nodes[0].start;
    let mut states: HashMap<(Option<&str>, &str, u64), AddrState> = HashMap::new();
    let mut pre: Vec<MemOut> = Vec::new();
    let mut body: Vec<MemOut> = Vec::with_capacity(c.mems.len());
    for &i in sorted {
        let m = &c.mems[i];
        let size = m.bytes.unsigned_abs().min(u64::MAX as u128) as u64;
        let span = spans[i];
        let op = ops[span as usize].map(|o| c.nodes[o as usize].name.clone());
        let process = if several { m.process.as_deref() } else { None };
        let sample = m.total_allocated.map(|used| {
            let reserved = if m.is_cpu {
                None
            } else {
                m.total_reserved.and_then(|r| u64::try_from(r).ok())
            };
            (u64::try_from(used).ok(), reserved)
        });
        let state = states
            .entry((process, m.device.as_str(), m.addr))
            .or_default();
        let event = |alloc: bool, generation: u32, pre_existing: bool| MemOut {
            ts: m.ts,
            alloc,
            device: m.device.clone(),
            process: process.map(str::to_string),
            storage_id: storage_id(process, m.addr, generation),
            bytes: size,
            span,
            op_name: op.clone(),
            pre_existing,
            live_delta: if alloc {
                i128::from(size)
            } else {
                -i128::from(size)
            },
            sample: None,
        };
        summary.events += 1;
        if m.bytes > 0 {
            summary.allocs += 1;
            if let Some((generation, live_bytes)) = state.live.take() {
                summary.inferred_frees += 1;
                let mut free = event(false, generation, false);
                free.bytes = live_bytes;
                free.live_delta = -i128::from(live_bytes);
                body.push(free);
            }
            let generation = state.next_generation;
            state.next_generation += 1;
            state.live = Some((generation, size));
            body.push(event(true, generation, false));
        } else {
            summary.frees += 1;
            match state.live.take() {
                Some((generation, live_bytes)) => {
                    let mut free = event(false, generation, false);
                    free.live_delta = -i128::from(live_bytes);
                    body.push(free);
                }
                None if state.next_generation == 0 => {
                    state.next_generation = 1;
                    summary.pre_existing += 1;
                    summary.pre_existing_bytes = summary.pre_existing_bytes.saturating_add(size);
                    let mut alloc = event(true, 0, true);
                    alloc.ts = origin;
                    alloc.span = 0;
                    alloc.op_name = None;
                    pre.push(alloc);
                    body.push(event(false, 0, false));
                }
                None => {
                    // Already freed: an unmatched free under a lifetime that never started.
                    summary.repeated_frees += 1;
                    let generation = state.next_generation;
                    state.next_generation += 1;
                    let mut free = event(false, generation, false);
                    free.live_delta = 0;
                    body.push(free);
                }
            }
        }
        if let Some(last) = body.last_mut() {
            last.sample = sample;
        }
    }
    (pre, body)
}

/// Warns of each device that several processes write to.
fn warn_shared(report: &mut ImportReport, users: &BTreeMap<&str, Vec<&str>>, shared: &[&str]) {
    for d in shared {
        report.warn(format!(
            "{d} is used by {} processes (pids {}): their storages are kept apart and the device's memory is their sum; PyTorch's Total Allocated counts one process, so it is compared per process and not written as the device's samples",
            users[d].len(),
            users[d].join(", ")
        ));
    }
}

/// Warns of missing frees, repeated frees and a varying gap to PyTorch's counter.
fn warn_summary(report: &mut ImportReport, summary: &MemoryImport) {
    if summary.inferred_frees > 0 {
        report.warn(format!(
            "{} addresses were allocated again while live (their frees are missing from the trace); each earlier lifetime ends at the new allocation",
            summary.inferred_frees
        ));
    }
    if summary.repeated_frees > 0 {
        report.warn(format!(
            "{} frees name an address already freed in the window; they are kept as unmatched frees",
            summary.repeated_frees
        ));
    }
    for d in &summary.devices {
        if let (Some(lo), Some(hi)) = (d.gap_min_bytes, d.gap_max_bytes) {
            if lo != hi {
                let device = match &d.process {
                    Some(p) => format!("{} (pid {p})", d.device),
                    None => d.device.clone(),
                };
                report.warn(format!(
                    "on {device}, PyTorch's Total Allocated minus the replayed live bytes varies from {lo} to {hi} B over the window (constant on a complete record): allocator events are missing from the trace, so figures are approximate"
                ));
            }
        }
    }
}

/// Per (device, process): live bytes after every event (pre-existing storages live from the
/// start), the replayed peak, and `Total Allocated − live` after each event that carries the
/// counter (a process's own counter against that process's replay). A device in `shared` gets
/// a combined entry too (process `None`): the replay of all its processes together.
fn cross_check<'a>(
    pre: &'a [MemOut],
    body: &'a [MemOut],
    shared: &[&str],
) -> Vec<DeviceMemoryImport> {
    let mut live: BTreeMap<(&'a str, Option<&'a str>), (i128, DeviceMemoryImport)> =
        BTreeMap::new();
    let entry = |device: &str, process: Option<&str>| DeviceMemoryImport {
        device: device.to_string(),
        process: process.map(str::to_string),
        ..DeviceMemoryImport::default()
    };
    for e in pre.iter().chain(body) {
        let (d, p) = (e.device.as_str(), e.process.as_deref());
        live.entry((d, p)).or_insert_with(|| (0, entry(d, p)));
        if shared.contains(&d) {
            live.entry((d, None)).or_insert_with(|| (0, entry(d, None)));
        }
    }
    let mut apply = |e: &'a MemOut, counted: bool| {
        let (d, p) = (e.device.as_str(), e.process.as_deref());
        if p.is_some() && shared.contains(&d) {
            let (bytes, all) = live.get_mut(&(d, None)).expect("entered above");
            *bytes += e.live_delta;
            all.events += u64::from(counted);
            all.replayed_peak_bytes = all.replayed_peak_bytes.max(clamp(*bytes));
        }
        let (bytes, d) = live.get_mut(&(d, p)).expect("entered above");
        *bytes += e.live_delta;
        d.events += u64::from(counted);
        d.replayed_peak_bytes = d.replayed_peak_bytes.max(clamp(*bytes));
        if let (true, Some((used, reserved))) = (counted, e.sample) {
            if let Some(used) = used {
                d.total_allocated_max_bytes =
                    Some(d.total_allocated_max_bytes.unwrap_or(0).max(used));
                let gap = i128::from(used) - *bytes;
                d.gap_min_bytes = Some(d.gap_min_bytes.map_or(gap, |g| g.min(gap)));
                d.gap_max_bytes = Some(d.gap_max_bytes.map_or(gap, |g| g.max(gap)));
            }
            if let Some(r) = reserved {
                d.total_reserved_max_bytes = Some(d.total_reserved_max_bytes.unwrap_or(0).max(r));
            }
        }
    };
    for e in pre {
        apply(e, false);
    }
    for e in body {
        apply(e, true);
    }
    live.into_values().map(|(_, d)| d).collect()
}

fn clamp(v: i128) -> u64 {
    v.clamp(0, u64::MAX as i128) as u64
}
