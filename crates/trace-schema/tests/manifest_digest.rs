//! The gradient manifest digest (`candle-graph/gradient-manifest/1`) against values computed
//! independently (Python's `hashlib.sha256` over the same bytes: the domain string, a NUL, then
//! each entry's root, key and family, each preceded by its length as a little-endian u64), so a
//! change of the byte layout or of the hash fails here.

use trace_schema::{gradient_manifest_digest, ExpectedGradient};

fn entry(root: &str, key: &str, family: &str) -> ExpectedGradient {
    ExpectedGradient {
        root: root.into(),
        key: key.into(),
        family: family.into(),
    }
}

#[test]
fn the_empty_manifest_has_its_known_digest() {
    assert_eq!(
        gradient_manifest_digest(&[]),
        "sha256:1a7019dd31b542e1d63c1ef86f0c96c188b624427fac0f6145678c3c453da80a"
    );
}

#[test]
fn entries_and_their_order_give_their_known_digests() {
    let weight = entry("model", "layer1.weight", "model");
    let bias = entry("model", "layer1.bias", "model");
    assert_eq!(
        gradient_manifest_digest(std::slice::from_ref(&weight)),
        "sha256:daff20def94b040dba9ae0c0cacbc41fd4bd32c75bba34c31ccd7c18d1249632"
    );
    assert_eq!(
        gradient_manifest_digest(&[weight.clone(), bias.clone()]),
        "sha256:1e2f427b9ae88ecce8d4cf05370f7872c6fbe8e08900933fc8eb1ba0ba6ba305"
    );
    assert_eq!(
        gradient_manifest_digest(&[bias, weight]),
        "sha256:aa5fc9bf26a86a155907cb89893d6b66b3630e89c48dff08923e5ec6d5abded2"
    );
}
