//! Parsing and checking of the `#[measure(...)]` options.
//!
//! Everything that can be rejected without looking at the function body is rejected here, with
//! the error spanned on the option the user wrote.

use proc_macro2::{Span, TokenStream, TokenTree};
use syn::ext::IdentExt;
use syn::parse::Parser;
use syn::punctuated::Punctuated;
use syn::spanned::Spanned;
use syn::{Error, Expr, ExprLit, ExprUnary, Ident, Lit, LitStr, Meta, Token, UnOp};

/// Every option the macro accepts, in the order the error message lists them.
const OPTIONS: &[&str] =
    &["name", "target", "level", "skip", "skip_all", "fields", "stage", "buckets", "input_size", "output_size"];

/// The parsed options of one `#[measure(...)]`.
#[derive(Default)]
pub(crate) struct Options {
    pub(crate) name: Option<LitStr>,
    pub(crate) target: Option<LitStr>,
    pub(crate) level: Option<(Ident, Span)>,
    pub(crate) skips: Vec<Ident>,
    pub(crate) skip_all: bool,
    pub(crate) fields: Option<TokenStream>,
    pub(crate) stage: Option<LitStr>,
    pub(crate) buckets: Option<Vec<f64>>,
    pub(crate) input_size: Option<(Expr, Span)>,
    pub(crate) output_size: Option<(Expr, Span)>,
}

impl Options {
    /// Parses the attribute's arguments.
    pub(crate) fn parse(args: TokenStream) -> syn::Result<Self> {
        let metas = Punctuated::<Meta, Token![,]>::parse_terminated.parse2(args)?;
        let mut options = Options::default();
        let mut seen: Vec<String> = Vec::new();
        for meta in metas {
            let key = meta.path().get_ident().map(|i| i.unraw().to_string()).unwrap_or_default();
            if !OPTIONS.contains(&key.as_str()) {
                return Err(Error::new(
                    meta.path().span(),
                    format!(
                        "unknown option `{}` of #[measure]; expected one of: {}",
                        quote::ToTokens::to_token_stream(meta.path()).to_string().replace(' ', ""),
                        OPTIONS.join(", ")
                    ),
                ));
            }
            if seen.contains(&key) {
                return Err(Error::new(meta.path().span(), format!("duplicate option `{key}` of #[measure]")));
            }
            seen.push(key.clone());
            match key.as_str() {
                "name" => options.name = Some(lit_str(&meta, &key)?),
                "target" => options.target = Some(lit_str(&meta, &key)?),
                "stage" => options.stage = Some(lit_str(&meta, &key)?),
                "level" => options.level = Some(level(&meta)?),
                "skip" => {
                    let list = meta.require_list()?;
                    let idents = list.parse_args_with(|input: syn::parse::ParseStream<'_>| {
                        Punctuated::<Ident, Token![,]>::parse_terminated_with(input, Ident::parse_any)
                    })?;
                    options.skips = idents.into_iter().collect();
                }
                "skip_all" => {
                    meta.require_path_only()?;
                    options.skip_all = true;
                }
                "fields" => options.fields = Some(meta.require_list()?.tokens.clone()),
                "buckets" => options.buckets = Some(buckets(&meta)?),
                "input_size" => options.input_size = Some((name_value(&meta, &key)?, meta.path().span())),
                "output_size" => options.output_size = Some((name_value(&meta, &key)?, meta.path().span())),
                _ => {}
            }
        }
        Ok(options)
    }

    /// Whether the user's `fields(...)` already declare a field called `name`.
    pub(crate) fn declares_field(&self, name: &str) -> bool {
        self.fields.as_ref().is_some_and(|fields| field_names(fields).iter().any(|f| f == name))
    }
}

/// The names of the fields in a `fields(...)` list: for each top-level comma-separated part,
/// the dotted name before `=` (a leading `?` or `%` shorthand sigil is skipped).
fn field_names(tokens: &TokenStream) -> Vec<String> {
    let mut names = Vec::new();
    let mut current = String::new();
    let mut in_value = false;
    for tt in tokens.clone() {
        match tt {
            TokenTree::Punct(p) if p.as_char() == ',' => {
                names.push(std::mem::take(&mut current));
                in_value = false;
            }
            TokenTree::Punct(p) if p.as_char() == '=' => in_value = true,
            TokenTree::Punct(p) if !in_value && p.as_char() == '.' => current.push('.'),
            TokenTree::Ident(i) if !in_value => current.push_str(&i.to_string()),
            TokenTree::Literal(l) if !in_value && current.is_empty() => {
                current.push_str(l.to_string().trim_matches('"'))
            }
            _ => {}
        }
    }
    if !current.is_empty() {
        names.push(current);
    }
    names
}

fn name_value(meta: &Meta, key: &str) -> syn::Result<Expr> {
    match meta {
        Meta::NameValue(nv) => Ok(nv.value.clone()),
        _ => Err(Error::new(meta.span(), format!("expected `{key} = <expression>`"))),
    }
}

fn lit_str(meta: &Meta, key: &str) -> syn::Result<LitStr> {
    match name_value(meta, key)? {
        Expr::Lit(ExprLit { lit: Lit::Str(s), .. }) => Ok(s),
        other => Err(Error::new(other.span(), format!("expected a string literal: `{key} = \"...\"`"))),
    }
}

/// `level = "info"` or `level = Level::INFO` (any path ending in a level name).
fn level(meta: &Meta) -> syn::Result<(Ident, Span)> {
    let value = name_value(meta, "level")?;
    let (text, span) = match &value {
        Expr::Lit(ExprLit { lit: Lit::Str(s), .. }) => (s.value(), s.span()),
        Expr::Path(p) => match p.path.segments.last() {
            Some(last) => (last.ident.to_string(), last.ident.span()),
            None => (String::new(), p.span()),
        },
        other => (String::new(), other.span()),
    };
    let upper = text.to_ascii_uppercase();
    match upper.as_str() {
        "TRACE" | "DEBUG" | "INFO" | "WARN" | "ERROR" => Ok((Ident::new(&upper, span), span)),
        _ => Err(Error::new(
            span,
            "expected a level: \"trace\", \"debug\", \"info\", \"warn\", \"error\" or `Level::INFO` and the like",
        )),
    }
}

/// `buckets = [0.01, 0.1, 1.0]`: numeric literals, finite, strictly increasing.
fn buckets(meta: &Meta) -> syn::Result<Vec<f64>> {
    let value = name_value(meta, "buckets")?;
    let Expr::Array(array) = &value else {
        return Err(Error::new(value.span(), "expected a list of bucket bounds: `buckets = [0.01, 0.1, 1.0]`"));
    };
    if array.elems.is_empty() {
        return Err(Error::new(array.span(), "`buckets` needs at least one bound"));
    }
    let mut bounds = Vec::with_capacity(array.elems.len());
    for elem in &array.elems {
        let bound = number(elem)
            .ok_or_else(|| Error::new(elem.span(), "a bucket bound must be a finite number literal (seconds)"))?;
        if bounds.last().is_some_and(|last| *last >= bound) {
            return Err(Error::new(elem.span(), "bucket bounds must be strictly increasing"));
        }
        bounds.push(bound);
    }
    Ok(bounds)
}

fn number(expr: &Expr) -> Option<f64> {
    let value = match expr {
        Expr::Lit(ExprLit { lit: Lit::Float(f), .. }) => f.base10_parse::<f64>().ok()?,
        Expr::Lit(ExprLit { lit: Lit::Int(i), .. }) => i.base10_parse::<f64>().ok()?,
        Expr::Unary(ExprUnary { op: UnOp::Neg(_), expr, .. }) => -number(expr)?,
        _ => return None,
    };
    value.is_finite().then_some(value)
}

#[cfg(test)]
mod tests {
    use super::*;
    use quote::quote;

    #[test]
    fn field_names_skip_sigils_and_values() {
        let names = field_names(&quote!(a = 1, b.c = %x, ?d, error = tracing::field::Empty));
        assert_eq!(names, ["a", "b.c", "d", "error"]);
    }

    #[test]
    fn options_parse() -> syn::Result<()> {
        let o = Options::parse(quote!(name = "n", level = "debug", skip(self, a), stage = "s", buckets = [0.1, 1]))?;
        assert_eq!(o.name.map(|n| n.value()).as_deref(), Some("n"));
        assert_eq!(o.level.map(|l| l.0.to_string()).as_deref(), Some("DEBUG"));
        assert_eq!(o.skips.len(), 2);
        assert_eq!(o.buckets, Some(vec![0.1, 1.0]));
        Ok(())
    }

    #[test]
    fn bad_options_are_errors() {
        for args in [
            quote!(nope = 1),
            quote!(name = 1),
            quote!(level = "loud"),
            quote!(buckets = [1.0, 0.5]),
            quote!(buckets = []),
            quote!(stage = "a", stage = "b"),
        ] {
            assert!(Options::parse(args).is_err());
        }
    }
}
