//! Text inside XML or HTML markup (element text and quoted attribute values): the one escape
//! the HTML report's attributes and the budget gate's JUnit XML share.

use std::borrow::Cow;

/// `s` safe inside XML or HTML element text and quoted attributes: `&`, `<`, `>`, `"` and `'`
/// as entities (`'` as `&#39;`, which XML 1.0 and every HTML read alike), control characters
/// other than tab and line feed dropped (XML 1.0 allows none of them). Text without any of
/// them is borrowed.
///
/// ```
/// assert_eq!(trace_format::markup_escape("a<b & \"c\" 'd'>"), "a&lt;b &amp; &quot;c&quot; &#39;d&#39;&gt;");
/// assert_eq!(trace_format::markup_escape("x\u{1b}[2J\ty"), "x[2J\ty");
/// ```
pub fn markup_escape(s: &str) -> Cow<'_, str> {
    let special = |c: char| matches!(c, '&' | '<' | '>' | '"' | '\'') || dropped(c);
    if !s.chars().any(special) {
        return Cow::Borrowed(s);
    }
    let mut out = String::with_capacity(s.len() + 16);
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c if dropped(c) => {}
            c => out.push(c),
        }
    }
    Cow::Owned(out)
}

/// Control characters XML 1.0 does not allow (all but tab and line feed).
fn dropped(c: char) -> bool {
    c.is_control() && c != '\t' && c != '\n'
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_five_entities_and_no_controls() {
        assert_eq!(
            markup_escape("</script><img onerror='x'>&"),
            "&lt;/script&gt;&lt;img onerror=&#39;x&#39;&gt;&amp;"
        );
        assert_eq!(
            markup_escape("\"><svg onload>"),
            "&quot;&gt;&lt;svg onload&gt;"
        );
        assert_eq!(markup_escape("a\u{0}b\u{7f}c\u{85}d\ne\tf"), "abcd\ne\tf");
        assert!(matches!(markup_escape("plain µ 数据"), Cow::Borrowed(_)));
        // an entity is escaped again: the text reads as written
        assert_eq!(markup_escape("&amp;"), "&amp;amp;");
    }
}
