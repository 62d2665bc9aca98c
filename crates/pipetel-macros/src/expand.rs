//! Code generation: rewrites the function body around a call guard.
//!
//! The body runs inside a closure (sync) or a pinned async block (async), so that every exit of
//! the user's code (`return`, `?`, the tail expression) comes back through the generated code,
//! which classifies the result before handing it on. Panics and dropped futures are handled by
//! the guard's `Drop` at run time. Generated locals use `Span::mixed_site()`, so they can neither
//! shadow nor be shadowed by the user's names.

use proc_macro2::{Span, TokenStream, TokenTree};
use quote::{quote, quote_spanned};
use syn::spanned::Spanned;
use syn::{Error, Expr, FnArg, Ident, Item, ItemFn, Pat, ReturnType, Type};

use crate::attr::Options;

/// The crate whose `__private` runtime the expansion calls: `pipetel` (what applications
/// depend on) or `pipetel-core` (what a library that only instruments depends on).
#[derive(Clone, Copy)]
pub(crate) enum Runtime {
    Pipetel,
    Core,
}

/// Expands `#[measure(args)] item`.
pub(crate) fn expand(runtime: Runtime, args: TokenStream, item: TokenStream) -> syn::Result<TokenStream> {
    let options = Options::parse(args)?;
    let function = match syn::parse2::<Item>(item.clone()) {
        Ok(Item::Fn(function)) => function,
        Ok(Item::Verbatim(_)) => {
            return Err(Error::new(
                first_span(&item),
                "#[measure] needs a function with a body (a trait method declaration has none)",
            ))
        }
        Ok(_) | Err(_) => {
            return Err(Error::new(
                first_span(&item),
                "#[measure] applies to functions and methods (`fn` items with a body)",
            ))
        }
    };
    check(&options, &function)?;
    Ok(generate(runtime, &options, function))
}

fn first_span(tokens: &TokenStream) -> Span {
    tokens.clone().into_iter().next().map_or_else(Span::call_site, |tt| tt.span())
}

fn check(options: &Options, function: &ItemFn) -> syn::Result<()> {
    let sig = &function.sig;
    if let Some(constness) = &sig.constness {
        return Err(Error::new(constness.span(), "#[measure] cannot be applied to a `const fn`"));
    }
    if let Some((_, span)) = &options.input_size {
        if sig.inputs.is_empty() {
            return Err(Error::new(
                *span,
                format!("`input_size` is evaluated on the arguments, and `{}` takes none", sig.ident),
            ));
        }
    }
    if let Some((_, span)) = &options.output_size {
        if is_unit(&sig.output) {
            return Err(Error::new(
                *span,
                format!("`output_size` is evaluated on the return value, and `{}` returns `()`", sig.ident),
            ));
        }
    }
    let params = param_names(sig);
    for skip in &options.skips {
        if !params.iter().any(|(name, _)| name == skip) {
            return Err(Error::new(skip.span(), format!("attempting to skip non-existent parameter `{skip}`")));
        }
    }
    Ok(())
}

fn is_unit(output: &ReturnType) -> bool {
    match output {
        ReturnType::Default => true,
        ReturnType::Type(_, ty) => matches!(&**ty, Type::Tuple(t) if t.elems.is_empty()),
    }
}

/// The function's named parameters and whether each records as a plain value (primitive types)
/// rather than through `Debug`, as `#[tracing::instrument]` does.
fn param_names(sig: &syn::Signature) -> Vec<(Ident, bool)> {
    sig.inputs
        .iter()
        .filter_map(|arg| match arg {
            FnArg::Receiver(r) => Some((Ident::new("self", r.self_token.span), false)),
            FnArg::Typed(pt) => match &*pt.pat {
                Pat::Ident(pi) => Some((pi.ident.clone(), is_value_type(&pt.ty))),
                _ => None,
            },
        })
        .collect()
}

fn is_value_type(ty: &Type) -> bool {
    const VALUES: &[&str] =
        &["bool", "str", "u8", "u16", "u32", "u64", "usize", "i8", "i16", "i32", "i64", "isize", "f32", "f64"];
    match ty {
        Type::Reference(r) if r.mutability.is_none() => is_value_type(&r.elem),
        Type::Paren(p) => is_value_type(&p.elem),
        Type::Path(p) if p.qself.is_none() && p.path.segments.len() == 1 => {
            p.path.get_ident().is_some_and(|i| VALUES.iter().any(|v| i == v))
        }
        _ => false,
    }
}

/// `Result<..>` written as such (any path ending in `Result`, so `io::Result<T>` counts).
fn returns_result(output: &ReturnType) -> bool {
    match output {
        ReturnType::Type(_, ty) => match &**ty {
            Type::Path(p) => p.path.segments.last().is_some_and(|s| s.ident == "Result"),
            _ => false,
        },
        ReturnType::Default => false,
    }
}

fn contains_impl(tokens: TokenStream) -> bool {
    tokens.into_iter().any(|tt| match tt {
        TokenTree::Ident(i) => i == "impl",
        TokenTree::Group(g) => contains_impl(g.stream()),
        _ => false,
    })
}

fn generate(runtime: Runtime, options: &Options, function: ItemFn) -> TokenStream {
    let ItemFn { attrs, vis, sig, block } = function;
    let p = match runtime {
        Runtime::Pipetel => quote!(::pipetel::__private),
        Runtime::Core => quote!(::pipetel_core::__private),
    };
    let m = Span::mixed_site();
    let site = Ident::new("__PIPETEL_SITE", m);
    let call = Ident::new("__pipetel_call", m);
    let entered = Ident::new("__pipetel_entered", m);
    let ret_var = Ident::new("__pipetel_ret", m);
    let fut = Ident::new("__pipetel_fut", m);

    let function_name = sig.ident.to_string().trim_start_matches("r#").to_string();
    let span_name = options.name.as_ref().map_or_else(|| quote!(#function_name), |n| quote!(#n));
    let target = options.target.as_ref().map(|t| quote!(target: #t,));
    let level = options.level.as_ref().map_or_else(|| Ident::new("INFO", Span::call_site()), |(l, _)| l.clone());
    let stage = options
        .stage
        .as_ref()
        .map_or_else(|| quote!(::core::option::Option::None), |s| quote!(::core::option::Option::Some(#s)));
    let buckets = options
        .buckets
        .as_ref()
        .map_or_else(|| quote!(::core::option::Option::None), |b| quote!(::core::option::Option::Some(&[#(#b),*])));
    let mark_span = !options.declares_field("error");
    let has_input = options.input_size.is_some();
    let has_output = options.output_size.is_some();

    // Span fields: the parameters (unless skipped or named in `fields`), our `error` marker,
    // then the user's fields verbatim.
    let mut fields: Vec<TokenStream> = Vec::new();
    if !options.skip_all {
        for (name, value) in param_names(&sig) {
            if options.skips.contains(&name) || options.declares_field(&name.to_string()) {
                continue;
            }
            fields.push(if value { quote!(#name = #name) } else { quote!(#name = #p::tracing::field::debug(&#name)) });
        }
    }
    if mark_span {
        fields.push(quote!(error = #p::tracing::field::Empty));
    }
    if let Some(user) = options.fields.as_ref().filter(|f| !f.is_empty()) {
        fields.push(user.clone());
    }
    let span = quote!(#p::tracing::span!(#target #p::tracing::Level::#level, #span_name, #(#fields),*));

    let input = options.input_size.as_ref().map(|(expr, _)| quote!(#call.input_size(#expr);));

    let is_result = returns_result(&sig.output);
    let annotation = match &sig.output {
        ReturnType::Type(_, ty) if !contains_impl(quote!(#ty)) => Some(quote!(: #ty)),
        _ => None,
    };
    let output = options.output_size.as_ref().map(|(expr, _)| {
        let ret = Ident::new("ret", Span::call_site());
        let size = match expr {
            Expr::Closure(_) => quote!(#p::apply(#ret, #expr)),
            other => quote!(#other),
        };
        if is_result {
            quote! {
                if let ::core::option::Option::Some(#ret) = #p::ok_ref(&#ret_var) {
                    #call.output_size(#size);
                }
            }
        } else {
            quote! {{
                let #ret = &#ret_var;
                #call.output_size(#size);
            }}
        }
    });
    let finish = if is_result { quote!(#call.finish_result(&#ret_var);) } else { quote!(#call.finish_ok();) };

    let prologue = quote! {
        static #site: #p::Site = #p::Site::new(#p::SiteInfo {
            function: #function_name,
            module: ::core::module_path!(),
            stage: #stage,
            buckets: #buckets,
            input_size: #has_input,
            output_size: #has_output,
            mark_span: #mark_span,
        });
        let #call = #p::Call::start(&#site, #span);
    };

    let body = if sig.asyncness.is_some() {
        quote_spanned! {block.span()=>
            #prologue
            {
                let #entered = #call.span().enter();
                #input
            }
            let mut #fut = ::core::pin::pin!(async move #block);
            #[allow(clippy::let_unit_value)]
            let #ret_var #annotation = #p::poll_in(&#call, #fut.as_mut()).await;
            #output
            #finish
            #ret_var
        }
    } else {
        quote_spanned! {block.span()=>
            #prologue
            let #entered = #call.span().enter();
            #input
            #[allow(clippy::redundant_closure_call, clippy::let_unit_value)]
            let #ret_var #annotation = (move || #block)();
            #output
            #finish
            #ret_var
        }
    };

    quote! {
        #(#attrs)*
        #vis #sig {
            #body
        }
    }
}
