//! The tables and their columns (the schema the README documents, see
//! [`crate::schema_markdown`]).

use crate::table::{Column, Kind, TableDef};

const fn col(
    name: &'static str,
    kind: Kind,
    nullable: bool,
    unit: &'static str,
    meaning: &'static str,
) -> Column {
    Column {
        name,
        kind,
        nullable,
        unit,
        meaning,
    }
}

const RUN_ID: Column = col(
    "run_id",
    Kind::Text,
    false,
    "-",
    "the trace's run id (meta `run_id`): with `rank`, the key of every table",
);
const RANK: Column = col(
    "rank",
    Kind::U32,
    true,
    "-",
    "global rank of the process (meta `rank`, trace/13); null outside a multi-process job",
);

/// `runs`: one row per trace.
pub const RUNS: TableDef = TableDef {
    name: "runs",
    row: "trace",
    columns: &[
        RUN_ID,
        RANK,
        col("local_rank", Kind::U32, true, "-", "rank on the node (meta `local_rank`)"),
        col("world_size", Kind::U32, true, "-", "processes of the job (meta `world_size`)"),
        col("source", Kind::Text, false, "-", "the trace file exported"),
        col("trace_schema", Kind::Text, false, "-", "`candle-graph/trace/N` of the file"),
        col("entrypoint", Kind::Text, false, "-", "the code path captured (`llama::train_step`)"),
        col("phase", Kind::Text, true, "-", "`train` or `infer`"),
        col("capture_step", Kind::U64, true, "-", "the one-based step captured"),
        col("warmup_steps", Kind::U64, true, "-", "steps run before it"),
        col("device", Kind::Text, true, "-", "device label (`cpu`, `cuda:0`)"),
        col("timestamp", Kind::Text, false, "-", "capture time, ISO-8601 UTC"),
        col("candle_version", Kind::Text, true, "-", "Candle version of the producer"),
        col("probe_version", Kind::Text, true, "-", "probe version of the producer"),
        col("truncated", Kind::Bool, false, "-", "the trace was cut short (figures are lower bounds)"),
        col("structurally_valid", Kind::Bool, false, "-", "the span hierarchy can be trusted (`check`)"),
        col("capture_complete", Kind::Bool, false, "-", "finished without failure, truncation or dropped events"),
        col("outer_wall_time_ns", Kind::U64, true, "ns", "wall time of the single measured region (the step time)"),
        col("logical_peak_bytes", Kind::U64, true, "bytes", "the analyzer's global logical peak (live storage bytes, all devices)"),
        col("logical_peak_timestamp_ns", Kind::U64, true, "ns", "when it was first reached (trace time)"),
        col("memory_events", Kind::U64, false, "-", "memory events in the trace"),
        col("spans", Kind::U64, false, "-", "spans in the trace"),
        col("measurement_scope", Kind::Text, true, "-", "capture contract: `profiled_work`, `production_equivalent`, `unknown`; null without a contract"),
        col("operations_coverage", Kind::Text, true, "-", "capture contract level of operations (`none`, `partial`, `sampled`, `complete`)"),
        col("tensors_coverage", Kind::Text, true, "-", "… of tensor facts"),
        col("gradients_coverage", Kind::Text, true, "-", "… of gradient facts"),
        col("logical_memory_coverage", Kind::Text, true, "-", "… of storage allocations and frees"),
        col("physical_memory_coverage", Kind::Text, true, "-", "… of device memory samples"),
        col("tensor_stats_coverage", Kind::Text, true, "-", "… of tensor statistics"),
        col("live_end_bytes", Kind::U64, true, "bytes", "logical bytes live when the trace ended (after the step)"),
        col("heap_end_bytes", Kind::U64, true, "bytes", "the process's live heap at the last device sample (the step's end): the counting tracking allocator's `used_bytes`, absolute, less the probe's symbol cache and bundler threads; null when not counted"),
    ],
};

/// `spans`: one row per span.
pub const SPANS: TableDef = TableDef {
    name: "spans",
    row: "span",
    columns: &[
        RUN_ID,
        RANK,
        col("span_id", Kind::Text, false, "-", "span id (`s<n>`)"),
        col("parent_id", Kind::Text, true, "-", "enclosing span; null on a root"),
        col("name", Kind::Text, false, "-", "display name"),
        col("path", Kind::Text, false, "-", "names from the root joined by `/` (long chains elided in the middle)"),
        col("span_kind", Kind::Text, false, "-", "`function`, `op` or `module`"),
        col("pass", Kind::Text, true, "-", "the pass the span declares (`forward`, `backward`, `optimizer`): the spans the pass peaks watch"),
        col("effective_pass", Kind::Text, true, "-", "its own or its nearest ancestor's pass"),
        col("measured", Kind::Bool, false, "-", "the single measured region"),
        col("start_ns", Kind::U64, false, "ns", "start, trace time"),
        col("end_ns", Kind::U64, true, "ns", "end; null for a span never closed"),
        col("duration_ns", Kind::U64, true, "ns", "duration; null for a span never closed"),
        col("depth", Kind::U32, false, "-", "0 for a root"),
        col("module_path", Kind::Text, true, "-", "module path of a module span"),
    ],
};

/// `storages`: one row per storage lifetime.
pub const STORAGES: TableDef = TableDef {
    name: "storages",
    row: "storage lifetime (alloc to free)",
    columns: &[
        RUN_ID,
        RANK,
        col(
            "storage_index",
            Kind::U64,
            false,
            "-",
            "order of the lifetime (by alloc time, then file order)",
        ),
        col(
            "storage_id",
            Kind::Text,
            true,
            "-",
            "the storage's id; null in traces without one (trace/6)",
        ),
        col("device", Kind::Text, false, "-", "device label"),
        col("bytes", Kind::U64, false, "bytes", "storage size"),
        col(
            "category",
            Kind::Text,
            false,
            "-",
            "`parameter`, `activation`, `gradient`, `optimizer`, `other`",
        ),
        col(
            "alloc_ns",
            Kind::U64,
            false,
            "ns",
            "allocation time, trace time",
        ),
        col(
            "free_ns",
            Kind::U64,
            true,
            "ns",
            "free time; null when live at the end of the trace",
        ),
        col(
            "pre_existing",
            Kind::Bool,
            false,
            "-",
            "allocated before the capture (parameters at start)",
        ),
        col(
            "span_id",
            Kind::Text,
            true,
            "-",
            "the span it was allocated in",
        ),
        col("span_path", Kind::Text, true, "-", "that span's path"),
        col("pass", Kind::Text, true, "-", "that span's effective pass"),
        col(
            "op_name",
            Kind::Text,
            true,
            "-",
            "the op that allocated it, once known",
        ),
        col(
            "label",
            Kind::Text,
            true,
            "-",
            "tensor label (`model/fc1.weight`)",
        ),
        col("shape", Kind::Text, true, "-", "dimensions, `[8, 16, 128]`"),
        col("dtype", Kind::Text, true, "-", "element type"),
    ],
};

/// `memory_events`: one row per memory event.
pub const MEMORY_EVENTS: TableDef = TableDef {
    name: "memory_events",
    row: "alloc or free event, in file order",
    columns: &[
        RUN_ID,
        RANK,
        col("event_index", Kind::U64, false, "-", "position among the trace's memory events (file order)"),
        col("timestamp_ns", Kind::U64, false, "ns", "event time, trace time; events apply in (`timestamp_ns`, `event_index`) order"),
        col("action", Kind::Text, false, "-", "`alloc` or `free`"),
        col("device", Kind::Text, false, "-", "device label"),
        col("storage_id", Kind::Text, true, "-", "storage id"),
        col("bytes", Kind::U64, true, "bytes", "the event's size"),
        col("category", Kind::Text, false, "-", "memory category"),
        col("span_id", Kind::Text, true, "-", "span the event happened in"),
        col("op_name", Kind::Text, true, "-", "op of an allocation"),
        col("pre_existing", Kind::Bool, false, "-", "an alloc recorded for a storage that existed before the capture"),
        col("live_delta_bytes", Kind::I64, true, "bytes", "change of live bytes (on `device`, and in total) as the analyzer applied the event: +size for a new storage, −its size for a matched free, 0 for an event that changes nothing (a free of an unknown storage, a repeated alloc); the running sum in apply order is the logical timeline; null on every row of a trace without a logical timeline (its live bytes overflowed, or it has no logical memory: `runs.logical_peak_bytes` is null too)"),
    ],
};

/// `ops`: one row per sampled op, pass and module.
pub const OPS: TableDef = TableDef {
    name: "ops",
    row: "op × pass × module of the sampled profile (estimates)",
    columns: &[
        RUN_ID,
        RANK,
        col(
            "op",
            Kind::Text,
            true,
            "-",
            "Candle op (`matmul`, `matmul.backward`) or non-op function path",
        ),
        col("op_kind", Kind::Text, true, "-", "what `op` is"),
        col("pass", Kind::Text, true, "-", "pass; null outside any"),
        col(
            "module",
            Kind::Text,
            true,
            "-",
            "module path; null outside any",
        ),
        col("thread", Kind::U64, false, "-", "the sampled thread's key"),
        col(
            "samples",
            Kind::U64,
            false,
            "-",
            "wall-clock stack samples in the row",
        ),
        col(
            "share",
            Kind::F64,
            false,
            "-",
            "share of the thread's samples in the measured region, 0..1 (an estimate)",
        ),
        col(
            "share_low",
            Kind::F64,
            false,
            "-",
            "95% Wilson interval of `share`, low",
        ),
        col("share_high", Kind::F64, false, "-", "… high"),
        col(
            "self_ns",
            Kind::U64,
            true,
            "ns",
            "estimated self time (share × the region's duration)",
        ),
        col(
            "self_ns_low",
            Kind::U64,
            true,
            "ns",
            "its 95% interval, low",
        ),
        col("self_ns_high", Kind::U64, true, "ns", "… high"),
        col(
            "calls",
            Kind::U64,
            true,
            "-",
            "allocating calls, exact (allocation sites, trace/13)",
        ),
    ],
};

/// `gradients`: one row per gradient fact.
pub const GRADIENTS: TableDef = TableDef {
    name: "gradients",
    row: "gradient fact",
    columns: &[
        RUN_ID,
        RANK,
        col("root", Kind::Text, false, "-", "parameter root (`model`)"),
        col(
            "key",
            Kind::Text,
            false,
            "-",
            "parameter key (`layer1.weight`) or a non-parameter's label",
        ),
        col(
            "state",
            Kind::Text,
            false,
            "-",
            "`present`, `missing`, `zero`, `non_finite`",
        ),
        col("norm", Kind::F64, true, "-", "L2 norm, when reported"),
        col(
            "parameter",
            Kind::Bool,
            false,
            "-",
            "the gradient of a parameter",
        ),
        col("bytes", Kind::U64, true, "bytes", "gradient storage size"),
        col(
            "non_finite_elements",
            Kind::U64,
            true,
            "-",
            "NaN or ±inf elements",
        ),
    ],
};

/// `findings`: one row per finding.
pub const FINDINGS: TableDef = TableDef {
    name: "findings",
    row: "finding of the analysis",
    columns: &[
        RUN_ID,
        RANK,
        col(
            "finding_index",
            Kind::U32,
            false,
            "-",
            "order of the finding",
        ),
        col(
            "severity",
            Kind::Text,
            false,
            "-",
            "`info`, `warning`, `error`",
        ),
        col(
            "code",
            Kind::Text,
            false,
            "-",
            "finding code (`memory_peak`)",
        ),
        col(
            "summary",
            Kind::Text,
            false,
            "-",
            "one sentence with the figures",
        ),
        col(
            "timestamp_ns",
            Kind::U64,
            true,
            "ns",
            "time of its evidence, when it has one",
        ),
    ],
};

/// Every table, in file order.
pub const TABLES: [TableDef; 7] = [
    RUNS,
    SPANS,
    STORAGES,
    MEMORY_EVENTS,
    OPS,
    GRADIENTS,
    FINDINGS,
];
