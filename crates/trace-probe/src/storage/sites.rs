//! Allocation sites on the drainer's side (outside the allocator): a storage's data-buffer
//! allocation carries a slot of the hook's stack pool (`trace_alloc::sites`); equal raw address
//! stacks are one site, numbered in order of first sight (FxHash of the address slice), so a
//! memory event names its site by id while the step runs. After the step the plug-in hands the
//! sites' stacks to the session's symbol table.

use std::sync::OnceLock;

use rustc_hash::FxHashMap as HashMap;

use trace_alloc::ring::SiteTag;
use trace_alloc::sites::{self, SiteCounts, Unwinder, WalkerCalibration};

/// The distinct raw stacks of one capture window, ids 0.. in order of first sight.
#[derive(Debug, Default)]
pub(crate) struct SiteTable {
    ids: HashMap<Box<[usize]>, u32>,
    stacks: Vec<Box<[usize]>>,
    /// Storages written with a site.
    pub(crate) storages_with_site: u64,
    /// Storages allocated in the window (alloc logged) written without one (below the
    /// threshold, or the capture was lost).
    pub(crate) storages_without_site: u64,
}

impl SiteTable {
    /// The site id of the stack `tag` names (`None`: no stack captured). Counts the storage.
    pub(crate) fn site_of(&mut self, tag: SiteTag) -> Option<u32> {
        if !tag.is_some() {
            self.storages_without_site += 1;
            return None;
        }
        self.storages_with_site += 1;
        let frames = tag.frames();
        if let Some(&id) = self.ids.get(frames) {
            return Some(id);
        }
        let id = u32::try_from(self.stacks.len()).ok()?;
        self.stacks.push(frames.into());
        self.ids.insert(frames.into(), id);
        Some(id)
    }

    /// The raw stacks, by site id.
    pub(crate) fn stacks(&self) -> &[Box<[usize]>] {
        &self.stacks
    }
}

/// What a window's site capture was asked to do and what it saw.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct SiteCapture {
    /// Allocations of at least this many bytes got a stack.
    pub threshold_bytes: u64,
    /// The walker used.
    pub unwinder: Unwinder,
    /// The hook's counts over the window.
    pub counts: SiteCounts,
    /// Distinct sites among the window's storages.
    pub sites: u64,
    /// Storages allocated in the window written with a site.
    pub storages_with_site: u64,
    /// Storages allocated in the window written without one.
    pub storages_without_site: u64,
}

/// The walker calibration of this process (run once, at the first session that captures
/// sites; see [`sites::calibrate`]). `TRACE_PROBE_SITE_UNWINDER=libgcc` forces libgcc (a
/// measurement knob).
pub(crate) fn walker() -> &'static WalkerCalibration {
    static CHOSEN: OnceLock<WalkerCalibration> = OnceLock::new();
    CHOSEN.get_or_init(|| {
        let mut c = sites::calibrate(calibration_tensor);
        if std::env::var_os("TRACE_PROBE_SITE_UNWINDER").is_some_and(|v| v == "libgcc") {
            c.unwinder = Unwinder::Libgcc;
        }
        c
    })
}

/// The walker calibration's allocation: a 2,048-element f32 Candle tensor (its data buffer is
/// the allocation walked both ways), made through Candle as the step's storages are.
#[inline(never)]
fn calibration_tensor() -> Option<candle_core::Tensor> {
    let t = candle_core::Tensor::zeros(2048, candle_core::DType::F32, &candle_core::Device::Cpu);
    super::tracker::note_probe_tensor();
    t.ok()
}
