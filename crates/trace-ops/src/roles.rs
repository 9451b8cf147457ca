//! Which Candle operations and which PyTorch operations do the same work: the role map, as data
//! (`rules/op-roles.json`, with its sources), extendable by the user, and each trace's ops as
//! one table whatever their source ([`SideOps`]: measured op spans of an import, or the sampled
//! estimate of a Candle capture).
//!
//! An op takes the first role, in map order, whose pass matches (a role without a pass: any)
//! and one of whose patterns for the op's side matches its name. Patterns are exact names,
//! `prefix*`, `*suffix` or `*infix*`. A user's map ([`RoleMap::extended_by`]) is tried first.

use serde::{Deserialize, Serialize};
use trace_schema::{Pass, TraceDocument};

use crate::measured::MeasuredOps;
use crate::profile::{GroupBy, OpProfile};
use crate::OpKind;

/// The built-in map (candle-core/candle-nn 0.11.1 against torch 2.15.0).
pub const DEFAULT_ROLES_JSON: &str = include_str!("rules/op-roles.json");

/// Which framework named an op.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Framework {
    /// candle-graph's op names for a Candle capture.
    Candle,
    /// PyTorch's op names (an imported profiler trace).
    Pytorch,
}

/// One role of the map.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Role {
    /// Its name (`matmul`, `gradient accumulation`).
    pub role: String,
    /// The pass it applies in; `None`: any.
    #[serde(default)]
    pub pass: Option<Pass>,
    /// Candle op name patterns.
    #[serde(default)]
    pub candle: Vec<String>,
    /// PyTorch op name patterns.
    #[serde(default)]
    pub pytorch: Vec<String>,
    /// What the pairing leaves unequal (shown beside the row).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
}

/// The role map.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RoleMap {
    /// Where the map comes from and how it is read.
    #[serde(default)]
    pub about: String,
    /// Roles in match order.
    pub roles: Vec<Role>,
}

/// Why a role map could not be read.
#[derive(Debug, thiserror::Error)]
#[error("op role map: {0}")]
pub struct RoleMapError(String);

/// Most roles a map may hold, and most patterns a role (a map is read from a user's file).
pub const MAX_ROLES: usize = 10_000;

impl RoleMap {
    /// The built-in map.
    pub fn builtin() -> Self {
        Self::from_json(DEFAULT_ROLES_JSON).expect("the built-in role map parses")
    }

    /// Reads a map in the built-in map's JSON format (`{"roles":[{"role","pass","candle",
    /// "pytorch","note"}]}`). Errors name the problem (serde's line and column).
    pub fn from_json(text: &str) -> Result<Self, RoleMapError> {
        let map: RoleMap =
            serde_json::from_str(text).map_err(|e| RoleMapError(format!("not a role map: {e}")))?;
        if map.roles.len() > MAX_ROLES {
            return Err(RoleMapError(format!(
                "{} roles (at most {MAX_ROLES})",
                map.roles.len()
            )));
        }
        for r in &map.roles {
            if r.role.trim().is_empty() {
                return Err(RoleMapError("a role without a name".to_string()));
            }
            if r.candle.len() + r.pytorch.len() > MAX_ROLES {
                return Err(RoleMapError(format!("role {}: too many patterns", r.role)));
            }
        }
        Ok(map)
    }

    /// This map with `user`'s roles tried first.
    pub fn extended_by(mut self, user: RoleMap) -> Self {
        let mut roles = user.roles;
        roles.append(&mut self.roles);
        self.roles = roles;
        self
    }

    /// The role of `name` (an op of `side` in `pass`), as an index into [`Self::roles`].
    pub fn role_of(&self, side: Framework, pass: Option<Pass>, name: &str) -> Option<usize> {
        self.roles.iter().position(|r| {
            r.pass.is_none_or(|p| Some(p) == pass)
                && match side {
                    Framework::Candle => &r.candle,
                    Framework::Pytorch => &r.pytorch,
                }
                .iter()
                .any(|pat| matches(pat, name))
        })
    }
}

/// Whether `name` matches `pattern` (exact, `prefix*`, `*suffix`, `*infix*`).
pub fn matches(pattern: &str, name: &str) -> bool {
    match (pattern.strip_prefix('*'), pattern.strip_suffix('*')) {
        (Some(rest), _) if rest.ends_with('*') && !rest.is_empty() => {
            name.contains(&rest[..rest.len() - 1])
        }
        (Some(suffix), _) => name.ends_with(suffix),
        (None, Some(prefix)) => name.starts_with(prefix),
        (None, None) => name == pattern,
    }
}

/// Where a side's op times come from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum TimeSource {
    /// Every call timed by the producer (PyTorch's profiler): exact.
    Measured,
    /// Estimated from wall-clock stack samples, with a 95% interval.
    Sampled,
}

/// One op of one side in one pass.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SideOp {
    /// Its name (trace text: escape before display).
    pub op: String,
    /// Its pass.
    pub pass: Option<Pass>,
    /// Time, ns: measured top-level time, or the sampled estimate.
    pub ns: Option<u64>,
    /// The estimate's 95% interval, ns (sampled only).
    pub low_ns: Option<u64>,
    /// See [`Self::low_ns`].
    pub high_ns: Option<u64>,
    /// Calls: top-level calls (measured), or the allocating calls the allocation sites count
    /// (a Candle capture with sites: calls that allocate at least the sites' threshold).
    pub calls: Option<u64>,
    /// Samples (sampled only).
    pub samples: Option<u64>,
    /// The alloc-clocked time of a Candle capture with sites, ns: a second, independent time
    /// source (from each allocating call to the next allocation on its thread; see
    /// [`crate::sites`]).
    pub alloc_clocked_ns: Option<u64>,
    /// Bytes the op's calls allocated: inside its top-level calls (measured), or its
    /// storages' bytes with an allocation site (a Candle capture with sites: storages of at
    /// least the sites' threshold). `None` when the trace cannot say.
    pub allocated_bytes: Option<u64>,
    /// The probe's own frames (its cost), not an op of the program: one row per pass, named
    /// [`PROBE_OP`].
    pub probe: bool,
    /// Time outside any op (a sampled stack without an op frame: the step's own code, the
    /// optimizer's loop, the backward driver's callers), named by its innermost function.
    pub outside_op: bool,
}

/// The name of a sampled side's one probe row per pass (the probe's own frames together).
pub const PROBE_OP: &str = "(probe)";

/// A trace's ops as one table.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SideOps {
    /// Whose names these are.
    pub framework: Framework,
    /// Where the times come from.
    pub source: TimeSource,
    /// Every op and pass.
    pub ops: Vec<SideOp>,
}

impl SideOps {
    /// The ops of `doc`: measured op spans when it has them (an import), else the sampled
    /// profile; `None` when it has neither. `framework` is PyTorch for an imported trace.
    pub fn from_document(doc: &TraceDocument, framework: Framework) -> Option<Self> {
        if MeasuredOps::from_document(doc).is_none() {
            let sites = crate::SiteProfile::from_document(doc);
            let mut profile = OpProfile::from_document(doc).ok()?;
            if let Some(s) = &sites {
                profile.attach_sites(s);
            }
            return Some(Self::sampled(framework, &profile, sites.as_ref()));
        }
        Self::of_analysis(doc, framework, None, None)
    }

    /// [`Self::from_document`] from an analysis already made: `operations` is the sampled
    /// profile with the sites attached (`trace_graph::Analysis::operations`) and `sites` the
    /// allocation sites; measured op spans, when the trace has them, win.
    pub fn of_analysis(
        doc: &TraceDocument,
        framework: Framework,
        operations: Option<&OpProfile>,
        sites: Option<&crate::SiteProfile>,
    ) -> Option<Self> {
        if let Some(m) = MeasuredOps::from_document(doc) {
            let ops = m
                .rows
                .iter()
                .filter(|r| r.top_level_calls > 0)
                .map(|r| SideOp {
                    op: r.op.clone(),
                    pass: r.pass,
                    ns: Some(r.top_level_ns),
                    low_ns: None,
                    high_ns: None,
                    calls: Some(r.top_level_calls),
                    samples: None,
                    alloc_clocked_ns: None,
                    allocated_bytes: m.has_memory.then_some(r.top_level_allocated_bytes),
                    probe: false,
                    outside_op: false,
                })
                .collect();
            return Some(Self {
                framework,
                source: TimeSource::Measured,
                ops,
            });
        }
        Some(Self::sampled(framework, operations?, sites))
    }

    /// The sampled side: `profile`'s rows per op and pass, with the sites' calls, alloc-clocked
    /// time and bytes; the probe's rows of a pass merged into one [`PROBE_OP`] row (samples and
    /// estimates summed).
    fn sampled(
        framework: Framework,
        profile: &OpProfile,
        sites: Option<&crate::SiteProfile>,
    ) -> Self {
        // bytes per op and pass from the sites (every module and thread together)
        let site_bytes: std::collections::HashMap<(String, Option<Pass>), u64> = sites
            .iter()
            .flat_map(|s| s.calls_by_op_pass())
            .fold(std::collections::HashMap::new(), |mut m, r| {
                let e = m.entry((r.op, r.pass)).or_insert(0u64);
                *e = e.saturating_add(r.bytes);
                m
            });
        let mut ops: Vec<SideOp> = Vec::new();
        let rows = profile.rows_by(GroupBy::OpPass).into_iter().map(|r| {
            let probe = r.kind == Some(OpKind::Probe);
            SideOp {
                op: if probe {
                    PROBE_OP.to_string()
                } else {
                    r.op.clone().unwrap_or_else(|| "(unknown)".to_string())
                },
                pass: r.pass,
                ns: r.self_ns,
                low_ns: r.self_ns_low,
                high_ns: r.self_ns_high,
                calls: r.calls,
                samples: Some(r.samples),
                alloc_clocked_ns: r.alloc_clocked_ns,
                allocated_bytes: sites.map(|_| {
                    r.op.as_ref()
                        .and_then(|op| site_bytes.get(&(op.clone(), r.pass)).copied())
                        .unwrap_or(0)
                }),
                probe,
                outside_op: r.kind == Some(OpKind::NonOp),
            }
        });
        for op in rows {
            let merged = op
                .probe
                .then(|| ops.iter_mut().find(|o| o.probe && o.pass == op.pass))
                .flatten();
            match merged {
                Some(m) => {
                    let add = |a: Option<u64>, b: Option<u64>| match (a, b) {
                        (Some(a), Some(b)) => Some(a.saturating_add(b)),
                        (a, b) => a.or(b),
                    };
                    m.ns = add(m.ns, op.ns);
                    m.low_ns = add(m.low_ns, op.low_ns);
                    m.high_ns = add(m.high_ns, op.high_ns);
                    m.samples = add(m.samples, op.samples);
                    m.calls = add(m.calls, op.calls);
                    m.alloc_clocked_ns = add(m.alloc_clocked_ns, op.alloc_clocked_ns);
                    m.allocated_bytes = add(m.allocated_bytes, op.allocated_bytes);
                }
                None => ops.push(op),
            }
        }
        Self {
            framework,
            source: TimeSource::Sampled,
            ops,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn patterns_match_exactly_by_prefix_suffix_and_infix() {
        assert!(matches("aten::mm", "aten::mm"));
        assert!(!matches("aten::mm", "aten::mm_"));
        assert!(matches("aten::*", "aten::mm"));
        assert!(matches(
            "*: AddmmBackward0",
            "autograd::engine::evaluate_function: AddmmBackward0"
        ));
        assert!(matches("*Backward*", "x: ReluBackward0"));
        assert!(!matches("*Backward*", "aten::relu"));
        assert!(matches("*", "anything"));
    }

    #[test]
    fn the_builtin_map_pairs_the_mlp_ops_by_pass() {
        let map = RoleMap::builtin();
        let role = |side, pass, name| {
            map.role_of(side, Some(pass), name)
                .map(|i| map.roles[i].role.as_str())
        };
        assert_eq!(
            role(Framework::Candle, Pass::Forward, "matmul"),
            Some("matmul")
        );
        assert_eq!(
            role(Framework::Pytorch, Pass::Forward, "aten::linear"),
            Some("matmul")
        );
        assert_eq!(
            role(Framework::Candle, Pass::Backward, "grad_accumulate"),
            Some("gradient accumulation")
        );
        assert_eq!(
            role(
                Framework::Pytorch,
                Pass::Backward,
                "autograd::engine::evaluate_function: torch::autograd::AccumulateGrad"
            ),
            Some("gradient accumulation")
        );
        // the pass decides: `add` is a bias add forward, a moment update in the optimizer
        assert_eq!(
            role(Framework::Candle, Pass::Forward, "add"),
            Some("bias_add")
        );
        assert_eq!(
            role(Framework::Candle, Pass::Optimizer, "add"),
            Some("AdamW: moments")
        );
        assert_eq!(
            role(Framework::Pytorch, Pass::Optimizer, "aten::lerp_"),
            Some("AdamW: moments")
        );
        assert_eq!(role(Framework::Candle, Pass::Forward, "no_such_op"), None);
    }

    #[test]
    fn a_user_map_is_tried_first_and_bad_maps_are_errors() {
        let user = RoleMap::from_json(
            r#"{"roles":[{"role":"mine","pass":"forward","candle":["matmul"],"pytorch":["aten::linear"]}]}"#,
        )
        .unwrap();
        let map = RoleMap::builtin().extended_by(user);
        let i = map
            .role_of(Framework::Candle, Some(Pass::Forward), "matmul")
            .unwrap();
        assert_eq!(map.roles[i].role, "mine");
        let err = RoleMap::from_json(r#"{"roles":[{"role":"x","pass":"sideways"}]}"#).unwrap_err();
        assert!(err.to_string().contains("not a role map"), "{err}");
        assert!(RoleMap::from_json(r#"{"roles":[{"role":" "}]}"#).is_err());
        assert!(RoleMap::from_json("[").is_err());
    }
}
