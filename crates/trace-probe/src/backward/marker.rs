//! The boundary marker: an identity `CustomOp1` whose `bwd` Candle calls when its backprop
//! reaches the marked tensor, and which passes the gradient through unchanged.
//!
//! Candle 0.11.1 gives a custom op's forward only `&CpuStorage` and wants a new storage back,
//! so the marker **copies** the tensor (one contiguous copy, `copy_strided_src` as
//! `Tensor::contiguous` does). The copy, its storage block and its tensor struct are allocated
//! with the allocator log off ([`trace_alloc::IgnoreAllocs`]), so the storage capture never sees
//! them: the trace's logical memory is the user's, and the probe counts the copied bytes
//! itself (`BackwardSpans::copies`). In backward Candle adds the passed-through gradient into a
//! fresh zero tensor of the input's shape (`GradStore::or_insert` + `add`, as for every op):
//! those two allocations are visible in the trace, inside the span the marker opened (output)
//! or right after the one it closed (input).

use std::sync::Arc;

use candle_core::backend::{BackendDevice, BackendStorage};
use candle_core::{CpuStorage, CustomOp1, Layout, Result, Shape, Tensor};

use super::call::{Boundary, ModuleCall};

/// The custom op's name (Candle error messages show it).
pub(crate) const MARKER_OP_NAME: &str = "candle-graph-backward-marker";

pub(crate) struct Marker {
    pub(crate) call: Arc<ModuleCall>,
    pub(crate) boundary: Boundary,
}

/// A contiguous copy of `(storage, layout)` on its own device.
fn copy<S>(storage: &S, layout: &Layout) -> Result<(S, Shape)>
where
    S: BackendStorage,
    S::Device: BackendDevice<Storage = S>,
{
    let shape = layout.shape().clone();
    // SAFETY: `copy_strided_src` writes every element of the `shape.elem_count()` elements the
    // uninitialised storage holds (exactly what `Tensor::contiguous` does).
    let mut out = unsafe { storage.device().alloc_uninit(&shape, storage.dtype())? };
    storage.copy_strided_src(&mut out, 0, layout)?;
    Ok((out, shape))
}

impl CustomOp1 for Marker {
    fn name(&self) -> &'static str {
        MARKER_OP_NAME
    }

    fn cpu_fwd(&self, storage: &CpuStorage, layout: &Layout) -> Result<(CpuStorage, Shape)> {
        copy(storage, layout)
    }

    #[cfg(feature = "cuda")]
    fn cuda_fwd(
        &self,
        storage: &candle_core::CudaStorage,
        layout: &Layout,
    ) -> Result<(candle_core::CudaStorage, Shape)> {
        copy(storage, layout)
    }

    #[cfg(feature = "metal")]
    fn metal_fwd(
        &self,
        storage: &candle_core::MetalStorage,
        layout: &Layout,
    ) -> Result<(candle_core::MetalStorage, Shape)> {
        copy(storage, layout)
    }

    fn bwd(&self, _arg: &Tensor, _res: &Tensor, grad_res: &Tensor) -> Result<Option<Tensor>> {
        if let Some(owner) = self.call.owner.upgrade() {
            owner.marker_reached(&self.call, self.boundary);
        }
        Ok(Some(grad_res.clone()))
    }
}
