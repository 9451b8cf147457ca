//! LEB128 varints for the compact logs kept beside a document or an analysis (spilled memory
//! events, op tensor ids, timeline changes): 7 bits a byte, low bits first, the high bit set
//! on every byte but the last.

/// Appends `v` to `out` (1–10 bytes).
#[inline]
pub fn put(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push((v as u8) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

/// Reads the varint at `*pos` and moves `*pos` past it; `None` when `buf` ends first. Bits past
/// the 64th are ignored (the logs only hold what [`put`] wrote).
#[inline]
pub fn get(buf: &[u8], pos: &mut usize) -> Option<u64> {
    let mut v = 0u64;
    let mut shift = 0u32;
    loop {
        let b = *buf.get(*pos)?;
        *pos += 1;
        v |= ((b & 0x7f) as u64) << shift;
        if b < 0x80 {
            return Some(v);
        }
        shift += 7;
        if shift >= 64 {
            return Some(v);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_edge_values_and_stops_at_the_end() {
        let values = [0, 1, 0x7f, 0x80, 300, u32::MAX as u64, u64::MAX];
        let mut buf = Vec::new();
        for v in values {
            put(&mut buf, v);
        }
        let mut pos = 0;
        for v in values {
            assert_eq!(get(&buf, &mut pos), Some(v));
        }
        assert_eq!(get(&buf, &mut pos), None);
        assert_eq!(get(&[0x80], &mut 0), None, "a cut varint is not a value");
    }
}
