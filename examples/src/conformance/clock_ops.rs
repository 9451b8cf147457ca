//! What the clock times for each family: the ops of the model's forward (named as the trace's
//! op frames name them), the arms its backward runs, and AdamW's ops per parameter — at the
//! shapes of [`super::models`]. Keep in step with `models.rs` (the op order of each forward).

use candle_core::{DType, Device, ModuleT, Result, Tensor, D};
use candle_nn::rnn::RNN;
use candle_nn::{VarBuilder, VarMap};

use super::clock::Clock;
use super::models::{self, Family, Model, CNN, CNN_HIDDEN, GRU, MLP, TRANSFORMER};

const FWD: &str = "forward";
const OPT: &str = "optimizer";

fn rnd(dims: &[usize]) -> Result<Tensor> {
    Tensor::rand(-1f32, 1f32, dims, &Device::Cpu)
}

fn dims(t: &Tensor) -> String {
    format!("{:?}", t.dims())
}

/// A linear layer as candle-nn 0.11.1's `Linear::forward` runs it on a contiguous input: a 3-d
/// input reshaped to 2-d, `matmul` with the transposed weight, reshaped back, then
/// `broadcast_add` of the bias: forward ops, or (`bw`) its arms. Returns its output.
fn linear(c: &mut Clock, bw: bool, x: &Tensor, out: usize) -> Result<Tensor> {
    let inp = x.dim(D::Minus1)?;
    let (w, b) = (rnd(&[out, inp])?, rnd(&[out])?);
    let lead: Vec<usize> = x.dims()[..x.rank() - 1].to_vec();
    let rows: usize = lead.iter().product();
    let mut out_dims = lead.clone();
    out_dims.push(out);
    if !bw {
        let x2 = x.reshape((rows, inp))?;
        let wt = w.t()?;
        let y = x2.matmul(&wt)?.reshape(out_dims.as_slice())?;
        c.op(
            FWD,
            "matmul",
            format!("{} x {}", dims(&x2), dims(&wt)),
            || x2.matmul(&wt),
        )?;
        c.op(FWD, "broadcast_add", dims(&y), || y.broadcast_add(&b))?;
        return y.broadcast_add(&b);
    }
    let x2 = if x.rank() == 2 {
        x.clone()
    } else {
        c.arm("reshape.backward", &[x], |v| v[0].reshape((rows, inp)))?
    };
    let wt = c.view_arm(&w, |t| t.t())?;
    let y = c.arm("matmul.backward", &[&x2, &wt], |v| v[0].matmul(&v[1]))?;
    let y = if x.rank() == 2 {
        y
    } else {
        c.arm("reshape.backward", &[&y], |v| {
            v[0].reshape(out_dims.as_slice())
        })?
    };
    c.broadcast_binary("add", &y, &b, |a, b| a.add(b))
}

/// candle-nn's `cross_entropy` (`log_softmax` then `nll`): the op, or its arms.
fn cross_entropy(c: &mut Clock, bw: bool, logits: &Tensor, targets: &Tensor) -> Result<()> {
    if !bw {
        return c.op(FWD, "cross_entropy", dims(logits), || {
            candle_nn::loss::cross_entropy(logits, targets)
        });
    }
    let max = c.arm("max.backward", &[logits], |v| v[0].max_keepdim(1))?;
    let diff = c.broadcast_binary("sub", logits, &max, |a, b| a.sub(b))?;
    let e = c.arm("exp.backward", &[&diff], |v| v[0].exp())?;
    let s = c.arm("sum.backward", &[&e], |v| v[0].sum_keepdim(1))?;
    let l = c.arm("log.backward", &[&s], |v| v[0].log())?;
    let lsm = c.broadcast_binary("sub", &diff, &l, |a, b| a.sub(b))?;
    let idx = targets.unsqueeze(1)?;
    let g = c.arm("gather.backward", &[&lsm], |v| v[0].gather(&idx, 1))?;
    let s = c.arm("sum.backward", &[&g], |v| v[0].sum_all())?;
    let n = targets.dim(0)? as f64;
    c.arm("affine.backward", &[&s], |v| v[0].affine(-1.0 / n, 0.0))?;
    Ok(())
}

/// Normalisation over `dim` of a `(rows, features)`-like tensor as candle-nn writes it
/// (`layer_norm_slow` over the last dim; batch norm over dim 1 of `(channels, n·h·w)`): its arms.
fn norm_arms(c: &mut Clock, x: &Tensor, dim: usize, w: &Tensor, b: &Tensor) -> Result<Tensor> {
    let n = x.dim(dim)? as f64;
    let s = c.arm("sum.backward", &[x], |v| v[0].sum_keepdim(dim))?;
    let mean = c.arm("affine.backward", &[&s], |v| v[0].affine(1.0 / n, 0.0))?;
    let xc = c.broadcast_binary("sub", x, &mean, |a, b| a.sub(b))?;
    let sq = c.arm("sqr.backward", &[&xc], |v| v[0].sqr())?;
    let s = c.arm("sum.backward", &[&sq], |v| v[0].sum_keepdim(dim))?;
    let var = c.arm("affine.backward", &[&s], |v| v[0].affine(1.0 / n, 0.0))?;
    let ve = c.arm("affine.backward", &[&var], |v| v[0].affine(1.0, 1e-5))?;
    let sd = c.arm("sqrt.backward", &[&ve], |v| v[0].sqrt())?;
    let xn = c.broadcast_binary("div", &xc, &sd, |a, b| a.div(b))?;
    let xw = c.broadcast_binary("mul", &xn, w, |a, b| a.mul(b))?;
    c.broadcast_binary("add", &xw, b, |a, b| a.add(b))
}

/// candle-nn's `BatchNorm::forward_train` on `(n, c, h, w)`: its arms.
fn batch_norm_arms(c: &mut Clock, x: &Tensor) -> Result<Tensor> {
    let (n, ch, h, w) = x.dims4()?;
    let xt = c.view_arm(x, |t| t.transpose(0, 1))?;
    let xf = c.arm("reshape.backward", &[&xt], |v| v[0].flatten_from(1))?;
    let (gamma, beta) = (rnd(&[ch, 1])?, rnd(&[ch, 1])?);
    let y = norm_arms(c, &xf, 1, &gamma, &beta)?;
    let y = c.arm("reshape.backward", &[&y], |v| v[0].reshape((ch, n, h, w)))?;
    c.view_arm(&y, |t| t.transpose(0, 1))
}

/// candle-nn's `Conv2d::forward` (padding 1, then the bias reshaped to `(1, c, 1, 1)` and
/// `broadcast_add`ed), relu, batch norm and a 2×2 max-pool: ops or arms.
fn conv_block(
    c: &mut Clock,
    bw: bool,
    x: &Tensor,
    out: usize,
    bn: &candle_nn::BatchNorm,
) -> Result<Tensor> {
    let k = rnd(&[out, x.dim(1)?, 3, 3])?;
    let bias = rnd(&[1, out, 1, 1])?;
    if !bw {
        let y = x.conv2d(&k, 1, 1, 1, 1)?;
        c.op(FWD, "conv2d", format!("{} * {}", dims(x), dims(&k)), || {
            x.conv2d(&k, 1, 1, 1, 1)
        })?;
        c.op(FWD, "broadcast_add", dims(&y), || y.broadcast_add(&bias))?;
        let y = y.broadcast_add(&bias)?;
        c.op(FWD, "batch_norm", dims(&y), || bn.forward_t(&y, true))?;
        let y = bn.forward_t(&y, true)?;
        c.op(FWD, "relu", dims(&y), || y.relu())?;
        let y = y.relu()?;
        c.op(FWD, "max_pool2d", dims(&y), || y.max_pool2d(2))?;
        return y.max_pool2d(2);
    }
    let y = c.arm("conv2d.backward", &[x, &k], |v| {
        v[0].conv2d(&v[1], 1, 1, 1, 1)
    })?;
    let y = c.broadcast_binary("add", &y, &bias, |a, b| a.add(b))?;
    let y = batch_norm_arms(c, &y)?;
    let y = c.arm("relu.backward", &[&y], |v| v[0].relu())?;
    c.arm("max_pool2d.backward", &[&y], |v| v[0].max_pool2d(2))
}

fn mlp(c: &mut Clock, bw: bool) -> Result<()> {
    let (b, i, h, classes) = MLP;
    let targets = models::batch(Family::Mlp, 42, 2, &Device::Cpu)?.targets;
    let mut x = rnd(&[b, i])?;
    for (l, out) in [h, h, classes].into_iter().enumerate() {
        x = linear(c, bw, &x, out)?;
        if l < 2 {
            x = relu(c, bw, &x)?;
        }
    }
    cross_entropy(c, bw, &x, &targets)
}

fn cnn(c: &mut Clock, bw: bool) -> Result<()> {
    let (b, side, c1, c2, classes) = CNN;
    let varmap = VarMap::new();
    let vb = VarBuilder::from_varmap(&varmap, DType::F32, &Device::Cpu);
    let bn1 = candle_nn::batch_norm(c1, candle_nn::BatchNormConfig::default(), vb.pp("bn1"))?;
    let bn2 = candle_nn::batch_norm(c2, candle_nn::BatchNormConfig::default(), vb.pp("bn2"))?;
    let targets = models::batch(Family::Cnn, 42, 2, &Device::Cpu)?.targets;
    let x = rnd(&[b, 1, side, side])?;
    let x = conv_block(c, bw, &x, c1, &bn1)?;
    let x = conv_block(c, bw, &x, c2, &bn2)?;
    let x = if bw {
        c.arm("reshape.backward", &[&x], |v| v[0].flatten_from(1))?
    } else {
        x.flatten_from(1)?
    };
    let x = linear(c, bw, &x, CNN_HIDDEN)?;
    let x = relu(c, bw, &x)?;
    let x = linear(c, bw, &x, classes)?;
    cross_entropy(c, bw, &x, &targets)
}

fn relu(c: &mut Clock, bw: bool, x: &Tensor) -> Result<Tensor> {
    if bw {
        return c.arm("relu.backward", &[x], |v| v[0].relu());
    }
    c.op(FWD, "relu", dims(x), || x.relu())?;
    x.relu()
}

/// One step of candle-nn's `GRU::step` as arms (its forward is one `seq` call, see [`gru`]).
fn gru_step_arms(c: &mut Clock, input: &Tensor, h: &Tensor) -> Result<Tensor> {
    let hid = h.dim(1)?;
    let ih = linear(c, true, input, 3 * hid)?;
    let hh = linear(c, true, h, 3 * hid)?;
    let mut chunks = Vec::with_capacity(6);
    for t in [&ih, &hh] {
        for i in 0..3 {
            chunks.push(c.arm("narrow.backward", &[t], |v| v[0].narrow(1, i * hid, hid))?);
        }
    }
    let gate = |c: &mut Clock, a: &Tensor, b: &Tensor| -> Result<Tensor> {
        let s = c.arm("add.backward", &[a, b], |v| v[0].add(&v[1]))?;
        c.arm("custom_op1.backward", &[&s], |v| {
            candle_nn::ops::sigmoid(&v[0])
        })
    };
    let r = gate(c, &chunks[0], &chunks[3])?;
    let z = gate(c, &chunks[1], &chunks[4])?;
    let rh = c.arm("mul.backward", &[&r, &chunks[5]], |v| v[0].mul(&v[1]))?;
    let a = c.arm("add.backward", &[&chunks[2], &rh], |v| v[0].add(&v[1]))?;
    let n = c.arm("tanh.backward", &[&a], |v| v[0].tanh())?;
    let zh = c.arm("mul.backward", &[&z, h], |v| v[0].mul(&v[1]))?;
    let zm = c.arm("affine.backward", &[&z], |v| v[0].affine(1.0, -1.0))?;
    let zn = c.arm("mul.backward", &[&zm, &n], |v| v[0].mul(&v[1]))?;
    c.arm("sub.backward", &[&zh, &zn], |v| v[0].sub(&v[1]))
}

fn gru(c: &mut Clock, bw: bool) -> Result<()> {
    let (b, steps, f, hid, classes) = GRU;
    let targets = models::batch(Family::Gru, 42, 2, &Device::Cpu)?.targets;
    let x = rnd(&[b, steps, f])?;
    let last = if bw {
        // every step runs the same arms at the same shapes: timed once, counted `steps` times
        let (from, acc) = c.mark();
        let input = rnd(&[b, f])?;
        let h = rnd(&[b, hid])?;
        let out = gru_step_arms(c, &input, &h)?;
        c.repeat_since(from, acc, steps as u32);
        out
    } else {
        let varmap = VarMap::new();
        let vb = VarBuilder::from_varmap(&varmap, DType::F32, &Device::Cpu);
        let g = candle_nn::gru(f, hid, Default::default(), vb)?;
        c.op(FWD, "gru", format!("{} → {hid}", dims(&x)), || {
            let states = g.seq(&x)?;
            Ok(states
                .last()
                .map(|s| s.h().clone())
                .unwrap_or_else(|| x.clone()))
        })?;
        rnd(&[b, hid])?
    };
    let x = linear(c, bw, &last, classes)?;
    cross_entropy(c, bw, &x, &targets)
}

/// `layer_norm_slow` over the last dim: the op, or its arms.
fn layer_norm(c: &mut Clock, bw: bool, x: &Tensor) -> Result<Tensor> {
    let d = x.dim(D::Minus1)?;
    let (w, b) = (rnd(&[d])?, rnd(&[d])?);
    if bw {
        return norm_arms(c, x, x.rank() - 1, &w, &b);
    }
    c.op(FWD, "layer_norm_slow", dims(x), || {
        candle_nn::ops::layer_norm_slow(x, &w, &b, 1e-5)
    })?;
    candle_nn::ops::layer_norm_slow(x, &w, &b, 1e-5)
}

/// One op of the forward or one arm of the backward, named by `op` / `arm`.
fn step(
    c: &mut Clock,
    bw: bool,
    (op, arm): (&str, &str),
    inputs: &[&Tensor],
    f: impl Fn(&[Tensor]) -> Result<Tensor>,
) -> Result<Tensor> {
    if bw {
        return c.arm(arm, inputs, f);
    }
    let plain: Vec<Tensor> = inputs.iter().map(|t| (*t).clone()).collect();
    c.op(FWD, op, dims(inputs[0]), || f(&plain))?;
    f(&plain)
}

/// A view (`t`, `transpose`, `permute`): free in the forward (not timed), its arm an
/// accumulation ([`Clock::view_arm`]).
fn view(
    c: &mut Clock,
    bw: bool,
    _op: &str,
    x: &Tensor,
    f: impl Fn(&Tensor) -> Result<Tensor>,
) -> Result<Tensor> {
    if bw {
        c.view_arm(x, f)
    } else {
        f(x)
    }
}

fn transformer(c: &mut Clock, bw: bool) -> Result<()> {
    let (b, t, v, d, heads, ff) = TRANSFORMER;
    let dh = d / heads;
    let batch = models::batch(Family::Transformer, 42, 2, &Device::Cpu)?;
    let ids = batch.inputs.flatten_all()?;
    let table = rnd(&[v, d])?;
    let e = step(
        c,
        bw,
        ("index_select", "index_select.backward"),
        &[&table],
        |x| x[0].index_select(&ids, 0),
    )?;
    let e = step(c, bw, ("reshape", "reshape.backward"), &[&e], |x| {
        x[0].reshape((b, t, d))
    })?;
    let pos = rnd(&[t, d])?;
    let x = if bw {
        c.broadcast_binary("add", &e, &pos, |a, b| a.add(b))?
    } else {
        step(c, bw, ("broadcast_add", ""), &[&e, &pos], |x| {
            x[0].broadcast_add(&x[1])
        })?
    };
    // attention
    let h = layer_norm(c, bw, &x)?;
    let qkv = linear(c, bw, &h, 3 * d)?;
    let qkv = step(c, bw, ("reshape", "reshape.backward"), &[&qkv], |x| {
        x[0].reshape((b, t, 3, heads, dh))
    })?;
    let qkv = view(c, bw, "permute", &qkv, |x| x.permute((2, 0, 3, 1, 4)))?;
    let mut qkv_parts = Vec::with_capacity(3);
    for i in 0..3 {
        qkv_parts.push(step(
            c,
            bw,
            ("contiguous", "narrow.backward"),
            &[&qkv],
            |x| x[0].get(i)?.contiguous(),
        )?);
    }
    let (q, k, vv) = (&qkv_parts[0], &qkv_parts[1], &qkv_parts[2]);
    let kt = view(c, bw, "t", k, |x| x.t())?;
    let s = step(c, bw, ("matmul", "matmul.backward"), &[q, &kt], |x| {
        x[0].matmul(&x[1])
    })?;
    let scale = 1.0 / (dh as f64).sqrt();
    let s = step(c, bw, ("mul", "affine.backward"), &[&s], |x| {
        x[0].affine(scale, 0.0)
    })?;
    let att = if bw {
        let max = c.arm("max.backward", &[&s], |x| x[0].max_keepdim(D::Minus1))?;
        let diff = c.broadcast_binary("sub", &s, &max, |a, b| a.sub(b))?;
        let num = c.arm("exp.backward", &[&diff], |x| x[0].exp())?;
        let den = c.arm("sum.backward", &[&num], |x| x[0].sum_keepdim(D::Minus1))?;
        c.broadcast_binary("div", &num, &den, |a, b| a.div(b))?
    } else {
        step(c, bw, ("softmax", ""), &[&s], |x| {
            candle_nn::ops::softmax(&x[0], D::Minus1)
        })?
    };
    let y = step(c, bw, ("matmul", "matmul.backward"), &[&att, vv], |x| {
        x[0].matmul(&x[1])
    })?;
    let y = view(c, bw, "transpose", &y, |x| x.transpose(1, 2))?;
    let y = step(c, bw, ("reshape", "reshape.backward"), &[&y], |x| {
        x[0].reshape((b, t, d))
    })?;
    let p = linear(c, bw, &y, d)?;
    let x = step(c, bw, ("add", "add.backward"), &[&x, &p], |z| {
        z[0].add(&z[1])
    })?;
    // feed-forward
    let h = layer_norm(c, bw, &x)?;
    let h = linear(c, bw, &h, ff)?;
    let h = step(c, bw, ("gelu", "gelu.backward"), &[&h], |z| z[0].gelu())?;
    let h = linear(c, bw, &h, d)?;
    let x = step(c, bw, ("add", "add.backward"), &[&x, &h], |z| {
        z[0].add(&z[1])
    })?;
    let x = layer_norm(c, bw, &x)?;
    let logits = linear(c, bw, &x, v)?;
    let logits = step(c, bw, ("reshape", "reshape.backward"), &[&logits], |z| {
        z[0].reshape((b * t, v))
    })?;
    cross_entropy(c, bw, &logits, &batch.targets)
}

/// candle-nn 0.11.1's `AdamW::step` for one parameter of `shape`, op by op (`Tensor * f64` and
/// `+ f64` are the `mul` / `add` of tensor.rs's operator traits; `Var::set` copies).
fn adamw_param(c: &mut Clock, shape: &[usize]) -> Result<()> {
    let (m, v, theta, g) = (rnd(shape)?, rnd(shape)?.abs()?, rnd(shape)?, rnd(shape)?);
    let what = format!("{shape:?}");
    // m·β1, g·(1−β1), v·β2, g²·(1−β2), m̂, v̂, θ·(1−lr·λ), adjusted·lr
    c.op_n(OPT, "mul", what.clone(), 8, || &m * 0.9)?;
    // the two moment sums, and v̂.sqrt() + ε
    c.op_n(OPT, "add", what.clone(), 2, || &m + &v)?;
    c.op_n(OPT, "add", what.clone(), 1, || &v + 1e-8)?;
    c.op(OPT, "sqr", what.clone(), || g.sqr())?;
    c.op(OPT, "sqrt", what.clone(), || v.sqrt())?;
    c.op(OPT, "div", what.clone(), || &m / &v)?;
    c.op(OPT, "sub", what.clone(), || &theta - &m)?;
    let var = candle_core::Var::from_tensor(&theta)?;
    c.op_n(OPT, "var_set", what, 3, || {
        var.set(&m)?;
        Ok(m.clone())
    })
}

fn optimizer(c: &mut Clock, family: Family) -> Result<()> {
    let varmap = VarMap::new();
    let vb = VarBuilder::from_varmap(&varmap, DType::F32, &Device::Cpu);
    let model = Model::new(family, vb)?;
    let loss = model.loss(&models::batch(family, 42, 1, &Device::Cpu)?)?;
    let grads = loss.backward()?;
    let mut vars = varmap.all_vars();
    vars.sort_by_key(|v| v.dims().to_vec());
    for var in vars {
        if grads.get(var.as_tensor()).is_some() {
            adamw_param(c, var.dims())?;
        }
    }
    Ok(())
}

/// Times `family`'s forward ops, backward arms and optimizer ops with `reps` repetitions each.
///
/// # Errors
/// Candle errors.
pub fn time_family(family: Family, reps: usize) -> Result<Clock> {
    let mut c = Clock::new(reps);
    let run: fn(&mut Clock, bool) -> Result<()> = match family {
        Family::Mlp => mlp,
        Family::Cnn => cnn,
        Family::Gru => gru,
        Family::Transformer => transformer,
    };
    run(&mut c, false)?;
    run(&mut c, true)?;
    c.finish_backward();
    optimizer(&mut c, family)?;
    Ok(c)
}
