//! The model the encoder benchmark trace (`crate::encoder`) is written from: its sizes, its
//! leaf modules and their stacks, its parameters.

/// Encoder layers.
pub(crate) const LAYERS: usize = 12;
/// Batch, sequence, hidden, intermediate sizes (f32 activations).
pub(crate) const BATCH: u64 = 8;
pub(crate) const SEQ: u64 = 128;
pub(crate) const HIDDEN: u64 = 768;
pub(crate) const INTER: u64 = 3072;
pub(crate) const HEADS: u64 = 12;
pub(crate) const VOCAB: u64 = 30522;
/// Threads sampled: 1 is the training loop, 2..=THREADS rayon workers.
pub(crate) const THREADS: usize = 9;
/// Temporaries per module forward / backward, worker scratch buffers per matmul.
pub(crate) const TEMPS_FORWARD: usize = 6;
pub(crate) const TEMPS_BACKWARD: usize = 8;
pub(crate) const SCRATCH: usize = 16;
/// Allocation-site capture threshold, bytes.
pub(crate) const SITE_THRESHOLD: u64 = 4096;
/// Sites per leaf kind (allocation slots are spread over them).
pub(crate) const SITES_PER_KIND: u32 = 12;
/// Sample period, ns (1 kHz).
pub(crate) const PERIOD_NS: u64 = 1_000_000;

/// What a leaf module does (its sampled stack, its sites, whether it runs a matmul).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Leaf {
    Embedding,
    Linear,
    Scores,
    LayerNorm,
    Dropout,
    Gelu,
    Tanh,
    Loss,
}

impl Leaf {
    pub(crate) const ALL: [Leaf; 8] = [
        Leaf::Embedding,
        Leaf::Linear,
        Leaf::Scores,
        Leaf::LayerNorm,
        Leaf::Dropout,
        Leaf::Gelu,
        Leaf::Tanh,
        Leaf::Loss,
    ];

    pub(crate) fn index(self) -> usize {
        Leaf::ALL.iter().position(|&l| l == self).unwrap_or(0)
    }

    /// The innermost frames of its forward (candle's kernel, then the tensor op).
    pub(crate) fn frames(self) -> [&'static str; 3] {
        match self {
            Leaf::Embedding => [
                "candle_core::cpu_backend::utils::IndexSelect::f",
                "candle_core::tensor::Tensor::index_select",
                "candle_nn::embedding::Embedding::forward",
            ],
            Leaf::Linear => [
                "gemm_f32::gemm::f32::x86::gemm_basic",
                "candle_core::tensor::Tensor::matmul",
                "candle_nn::linear::Linear::forward",
            ],
            Leaf::Scores => [
                "gemm_f32::gemm::f32::x86::gemm_basic",
                "candle_core::tensor::Tensor::matmul",
                "bert::BertSelfAttention::forward",
            ],
            Leaf::LayerNorm => [
                "candle_nn::ops::layer_norm_slow",
                "candle_core::tensor::Tensor::broadcast_div",
                "candle_nn::layer_norm::LayerNorm::forward",
            ],
            Leaf::Dropout => [
                "candle_core::cpu_backend::CpuStorage::binary_impl",
                "candle_core::tensor::Tensor::mul",
                "candle_nn::ops::Dropout::forward",
            ],
            Leaf::Gelu => [
                "candle_core::cpu_backend::CpuStorage::unary_impl",
                "candle_core::tensor::Tensor::gelu_erf",
                "candle_nn::activation::Activation::forward",
            ],
            Leaf::Tanh => [
                "candle_core::cpu_backend::CpuStorage::unary_impl",
                "candle_core::tensor::Tensor::tanh",
                "bert::BertPooler::forward",
            ],
            Leaf::Loss => [
                "candle_core::cpu_backend::CpuStorage::reduce_op",
                "candle_nn::ops::log_softmax",
                "candle_nn::loss::cross_entropy",
            ],
        }
    }

    pub(crate) fn matmul(self) -> bool {
        matches!(self, Leaf::Linear | Leaf::Scores)
    }
}

/// The outer frames every main-thread stack ends with, outermost last.
pub(crate) const OUTER: [&str; 4] = [
    "bert::BertModel::forward",
    "bench_encoder::train_step",
    "bench_encoder::main",
    "std::rt::lang_start_internal",
];
/// A worker's stacks: a gemm kernel under rayon, or parked.
pub(crate) const WORKER: [&str; 4] = [
    "gemm_f32::microkernel::f32::x86::avx::x3x4",
    "gemm_common::gemm::gemm_basic_generic",
    "rayon_core::registry::WorkerThread::wait_until_cold",
    "std::sys::pal::unix::thread::Thread::new::thread_start",
];

/// A parameter: its name and bytes.
pub(crate) struct Param {
    pub(crate) name: String,
    pub(crate) bytes: u64,
    pub(crate) shape: Vec<u64>,
}

pub(crate) fn parameters() -> Vec<Param> {
    let p = |name: String, shape: Vec<u64>| Param {
        bytes: shape.iter().product::<u64>() * 4,
        name,
        shape,
    };
    let mut v = vec![
        p(
            "bert.embeddings.word_embeddings.weight".into(),
            vec![VOCAB, HIDDEN],
        ),
        p(
            "bert.embeddings.position_embeddings.weight".into(),
            vec![512, HIDDEN],
        ),
        p(
            "bert.embeddings.token_type_embeddings.weight".into(),
            vec![2, HIDDEN],
        ),
        p("bert.embeddings.LayerNorm.weight".into(), vec![HIDDEN]),
        p("bert.embeddings.LayerNorm.bias".into(), vec![HIDDEN]),
    ];
    for l in 0..LAYERS {
        let pre = format!("bert.encoder.layer.{l}");
        for (m, out, inp) in [
            ("attention.self.query", HIDDEN, HIDDEN),
            ("attention.self.key", HIDDEN, HIDDEN),
            ("attention.self.value", HIDDEN, HIDDEN),
            ("attention.output.dense", HIDDEN, HIDDEN),
            ("intermediate.dense", INTER, HIDDEN),
            ("output.dense", HIDDEN, INTER),
        ] {
            v.push(p(format!("{pre}.{m}.weight"), vec![out, inp]));
            v.push(p(format!("{pre}.{m}.bias"), vec![out]));
        }
        for m in ["attention.output.LayerNorm", "output.LayerNorm"] {
            v.push(p(format!("{pre}.{m}.weight"), vec![HIDDEN]));
            v.push(p(format!("{pre}.{m}.bias"), vec![HIDDEN]));
        }
    }
    v.push(p("bert.pooler.dense.weight".into(), vec![HIDDEN, HIDDEN]));
    v.push(p("bert.pooler.dense.bias".into(), vec![HIDDEN]));
    v.push(p("classifier.weight".into(), vec![2, HIDDEN]));
    v.push(p("classifier.bias".into(), vec![2]));
    v
}

/// Sample stacks of the training thread (8 leaf kinds × forward/backward × 3 variants); the
/// workers' two follow.
pub(crate) const MAIN_STACKS: u32 = 8 * 2 * 3;
