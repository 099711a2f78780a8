//! A small element tree over `xmlparser`'s tokens: enough to read the
//! Query answers of EC2 (the network check) and IAM (the permission
//! simulation): elements and their text; no namespaces, attributes or
//! mixed content matter there.

/// An element: its local name, its text and its child elements.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub(crate) struct Element {
    pub name: String,
    pub text: String,
    pub children: Vec<Element>,
}

impl Element {
    /// The first child called `name`.
    pub(crate) fn child(&self, name: &str) -> Option<&Element> {
        self.children.iter().find(|c| c.name == name)
    }

    /// The text of the first child called `name` (trimmed), when present.
    pub(crate) fn text_of(&self, name: &str) -> Option<&str> {
        self.child(name).map(|c| c.text.trim())
    }

    /// The `<item>` children of the child called `set` (EC2's lists).
    #[cfg_attr(not(feature = "efs"), allow(dead_code))]
    pub(crate) fn items<'a>(&'a self, set: &str) -> impl Iterator<Item = &'a Element> {
        self.child(set)
            .into_iter()
            .flat_map(|s| s.children.iter().filter(|c| c.name == "item"))
    }

    /// The `<member>` children of the child called `set` (IAM's lists).
    #[cfg_attr(not(feature = "permissions"), allow(dead_code))]
    pub(crate) fn members<'a>(&'a self, set: &str) -> impl Iterator<Item = &'a Element> {
        self.child(set)
            .into_iter()
            .flat_map(|s| s.children.iter().filter(|c| c.name == "member"))
    }

    /// The first element called `name` at any depth (this one included).
    pub(crate) fn find(&self, name: &str) -> Option<&Element> {
        if self.name == name {
            return Some(self);
        }
        self.children.iter().find_map(|c| c.find(name))
    }
}

/// The document's root element, `None` when `body` is not well-formed XML.
pub(crate) fn parse(body: &str) -> Option<Element> {
    use xmlparser::{ElementEnd, Token};
    let mut stack: Vec<Element> = Vec::new();
    let mut root = None;
    for token in xmlparser::Tokenizer::from(body) {
        match token.ok()? {
            Token::ElementStart { local, .. } => stack.push(Element {
                name: local.as_str().to_owned(),
                ..Element::default()
            }),
            Token::ElementEnd { end, .. } => match end {
                ElementEnd::Open => {}
                ElementEnd::Close(..) | ElementEnd::Empty => {
                    let done = stack.pop()?;
                    match stack.last_mut() {
                        Some(parent) => parent.children.push(done),
                        None => root = Some(done),
                    }
                }
            },
            Token::Text { text } => {
                if let Some(top) = stack.last_mut() {
                    top.text.push_str(&unescape(text.as_str()));
                }
            }
            Token::Cdata { text, .. } => {
                if let Some(top) = stack.last_mut() {
                    top.text.push_str(text.as_str());
                }
            }
            _ => {}
        }
    }
    if stack.is_empty() { root } else { None }
}

/// The five predefined entities (EC2 and IAM escape nothing else in the
/// fields read).
fn unescape(text: &str) -> String {
    text.replace("&lt;", "<")
        .replace("&gt;", ">")
        .replace("&quot;", "\"")
        .replace("&apos;", "'")
        .replace("&amp;", "&")
}

#[cfg(test)]
mod tests {
    use super::parse;

    #[test]
    fn reads_nested_items_and_text() {
        let doc = parse(
            r#"<?xml version="1.0"?><R xmlns="x"><set><item><id>a</id></item><item><id>b&amp;c</id></item></set><e/></R>"#,
        )
        .unwrap();
        let ids: Vec<_> = doc.items("set").map(|i| i.text_of("id").unwrap()).collect();
        assert_eq!(ids, ["a", "b&c"]);
        assert!(doc.child("e").is_some());
        assert!(parse("<a><b></a>").is_none());
    }
}
