//! The role map covers every op name Candle 0.11.1 can put on a stack (the generated
//! `CANDLE_OPS`, from the op files) and every arm of candle-core's `backprop.rs` (the generated
//! `BACKWARD_LINES`), in every pass, and the PyTorch names of the same work.

use trace_ops::rules::{
    candle_ops::CANDLE_OPS, generated, BACKWARD, GRAD_ACCUMULATE, LAYER_OPS, NN_CUSTOM_OP_ARMS,
    NOT_OPS, SORT_NODES,
};
use trace_ops::{Framework, RoleMap};
use trace_schema::Pass;

const PASSES: [Option<Pass>; 4] = [
    Some(Pass::Forward),
    Some(Pass::Backward),
    Some(Pass::Optimizer),
    None,
];

fn role<'a>(map: &'a RoleMap, side: Framework, pass: Option<Pass>, name: &str) -> Option<&'a str> {
    map.role_of(side, pass, name)
        .map(|i| map.roles[i].role.as_str())
}

/// The backward op names the classifier makes: `<arm>.backward` for every arm of the table,
/// gradient accumulation, the node sort and the driver.
fn backward_names() -> Vec<String> {
    let mut names: Vec<String> = generated::BACKWARD_LINES
        .iter()
        .filter(|(_, _, arm)| !arm.is_empty())
        .map(|(_, _, arm)| format!("{arm}.backward"))
        .collect();
    names.sort();
    names.dedup();
    names.extend([GRAD_ACCUMULATE, SORT_NODES, BACKWARD].map(String::from));
    names
}

#[test]
fn every_candle_op_has_a_role_in_every_pass() {
    let map = RoleMap::builtin();
    let mut missing = Vec::new();
    let ops: Vec<&str> = CANDLE_OPS
        .iter()
        .map(|&(n, _)| n)
        .filter(|n| !NOT_OPS.contains(n) && !generated::HELPERS.contains(n))
        .collect();
    assert!(
        ops.len() > 180,
        "{} ops: the table lost its sources",
        ops.len()
    );
    for (name, at) in CANDLE_OPS.iter().filter(|(n, _)| ops.contains(n)) {
        for pass in PASSES {
            if role(&map, Framework::Candle, pass, name).is_none() {
                missing.push(format!("{name} ({at}) in {pass:?}"));
            }
        }
    }
    for l in LAYER_OPS {
        for pass in PASSES {
            if role(&map, Framework::Candle, pass, l.op).is_none() {
                missing.push(format!("{} ({}) in {pass:?}", l.op, l.path));
            }
        }
    }
    let mut backward = backward_names();
    assert!(backward.len() > 50, "{} backward names", backward.len());
    backward.extend(NN_CUSTOM_OP_ARMS.iter().map(|(_, arm)| arm.to_string()));
    for name in &backward {
        for pass in [Some(Pass::Backward), None] {
            if role(&map, Framework::Candle, pass, name).is_none() {
                missing.push(format!("{name} (src/backprop.rs arm) in {pass:?}"));
            }
        }
    }
    assert!(
        missing.is_empty(),
        "ops without a role:\n{}",
        missing.join("\n")
    );
}

#[test]
fn layers_of_the_conformance_suite_pair_with_their_pytorch_ops() {
    let map = RoleMap::builtin();
    let fwd = Some(Pass::Forward);
    let bwd = Some(Pass::Backward);
    for (pass, candle, pytorch, expected) in [
        (fwd, "gru", "aten::gru", "rnn"),
        (fwd, "rnn_seq", "aten::lstm", "rnn"),
        (fwd, "batch_norm", "aten::batch_norm", "norm"),
        (
            bwd,
            "sigmoid.backward",
            "autograd::engine::evaluate_function: SigmoidBackward0",
            "activation.backward",
        ),
        (
            bwd,
            "narrow.backward",
            "autograd::engine::evaluate_function: UnsafeSplitBackward0",
            "layout.backward",
        ),
    ] {
        assert_eq!(
            role(&map, Framework::Candle, pass, candle),
            Some(expected),
            "{candle}"
        );
        assert_eq!(
            role(&map, Framework::Pytorch, pass, pytorch),
            Some(expected),
            "{pytorch}"
        );
    }
    assert_eq!(
        role(&map, Framework::Candle, Some(Pass::Optimizer), "var_set"),
        Some("variable write")
    );
}

#[test]
fn the_issue_cnn_ops_have_the_roles_of_their_pytorch_work() {
    let map = RoleMap::builtin();
    let fwd = Some(Pass::Forward);
    let bwd = Some(Pass::Backward);
    let pairs = [
        (fwd, "conv2d_with_algo", "aten::conv2d", "conv"),
        (fwd, "conv2d", "aten::convolution", "conv"),
        (fwd, "max_pool2d", "aten::max_pool2d", "pool"),
        (fwd, "relu", "aten::relu", "activation"),
        (fwd, "cross_entropy", "aten::cross_entropy_loss", "loss"),
        (
            bwd,
            "conv2d.backward",
            "autograd::engine::evaluate_function: ConvolutionBackward0",
            "conv.backward",
        ),
        (
            bwd,
            "max_pool2d.backward",
            "autograd::engine::evaluate_function: MaxPool2DWithIndicesBackward0",
            "pool.backward",
        ),
        (
            bwd,
            "relu.backward",
            "autograd::engine::evaluate_function: ReluBackward0",
            "activation.backward",
        ),
        (
            bwd,
            "matmul.backward",
            "autograd::engine::evaluate_function: AddmmBackward0",
            "matmul.backward",
        ),
    ];
    for (pass, candle, pytorch, expected) in pairs {
        assert_eq!(
            role(&map, Framework::Candle, pass, candle),
            Some(expected),
            "{candle}"
        );
        assert_eq!(
            role(&map, Framework::Pytorch, pass, pytorch),
            Some(expected),
            "{pytorch}"
        );
    }
    // the bias gradient is the bias's, not the matmul's
    assert_eq!(
        role(&map, Framework::Candle, bwd, "broadcast.backward"),
        Some("bias.backward")
    );
}

#[test]
fn an_unknown_name_has_no_role_rather_than_a_catch_all() {
    let map = RoleMap::builtin();
    for pass in PASSES {
        assert_eq!(role(&map, Framework::Candle, pass, "my_own_op"), None);
        assert_eq!(
            role(
                &map,
                Framework::Pytorch,
                pass,
                "autograd::engine::evaluate_function: FancyNewBackward0"
            ),
            None
        );
        assert_eq!(
            role(&map, Framework::Pytorch, pass, "aten::fancy_new_op"),
            None
        );
    }
}
