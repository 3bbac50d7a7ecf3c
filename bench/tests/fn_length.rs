//! House rule: no function of the product (`crates/*/src`, `crates/*/benches`) or of the
//! bench (`bench/src`) is longer than 80 lines, counted from the line of its `fn` to the
//! line of its closing brace. Test code is exempt: items under `#[cfg(test)]` (and the files
//! of a module declared there), `#[test]` functions, `tests.rs` files and `tests/`
//! directories. The test fails naming each longer function's file, line and name, but for
//! those on [`PENDING`], which another change splits.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::{Path, PathBuf};

use proc_macro2::{TokenStream, TokenTree};
use syn::visit::{self, Visit};

/// The longest a function may be, in lines.
const LIMIT: usize = 80;

/// Functions over the limit that the change owning them splits, as (file, function). Each
/// must still be over the limit: the test fails once one is not, to take it off the list.
const PENDING: &[(&str, &str)] = &[];

/// The repository's root.
fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// The source trees the rule covers: each crate's `src` and `benches`, and `bench/src`.
fn trees() -> Vec<PathBuf> {
    let crates = std::fs::read_dir(root().join("crates")).expect("crates/ is readable");
    let mut trees: Vec<PathBuf> = crates
        .flatten()
        .flat_map(|c| [c.path().join("src"), c.path().join("benches")])
        .filter(|d| d.is_dir())
        .collect();
    trees.push(root().join("bench/src"));
    trees.sort();
    trees
}

/// The `.rs` files under `dir`, without `tests.rs` files and `tests/` directories.
fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let entries = std::fs::read_dir(dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display()));
    for entry in entries.flatten() {
        let path = entry.path();
        let name = entry.file_name();
        if path.is_dir() {
            if name != "tests" {
                rust_files(&path, out);
            }
        } else if path.extension().is_some_and(|x| x == "rs") && name != "tests.rs" {
            out.push(path);
        }
    }
}

/// One function with a body: where its `fn` is, its name and its length in lines.
#[derive(Debug, PartialEq)]
struct Function {
    line: usize,
    name: String,
    lines: usize,
}

/// What one file holds: its functions outside test code, and the names of the modules it
/// declares under `#[cfg(test)]` in files of their own (`#[cfg(test)] mod name;`).
#[derive(Default)]
struct Scan {
    functions: Vec<Function>,
    test_modules: Vec<String>,
    /// The type of the `impl` block being read, naming its methods `Type::method`.
    self_type: Option<String>,
}

/// Whether a `cfg` predicate holds only under test: `test`, or `all(…)` with such a part.
fn test_predicate(tokens: TokenStream) -> bool {
    let tokens: Vec<TokenTree> = tokens.into_iter().collect();
    match tokens.as_slice() {
        [TokenTree::Ident(i)] => i == "test",
        [TokenTree::Ident(i), TokenTree::Group(args)] if i == "all" => {
            let mut parts = vec![TokenStream::new()];
            for tt in args.stream() {
                match tt {
                    TokenTree::Punct(p) if p.as_char() == ',' => parts.push(TokenStream::new()),
                    tt => parts.last_mut().expect("one part at least").extend([tt]),
                }
            }
            parts.into_iter().any(test_predicate)
        }
        _ => false,
    }
}

/// Whether an item with these attributes is test code: `#[test]` or `#[cfg(test)]`.
fn is_test(attrs: &[syn::Attribute]) -> bool {
    attrs.iter().any(|a| match &a.meta {
        syn::Meta::Path(p) => p.is_ident("test"),
        syn::Meta::List(l) => l.path.is_ident("cfg") && test_predicate(l.tokens.clone()),
        syn::Meta::NameValue(_) => false,
    })
}

/// The last segment of a type's path (`Metrics` for `crate::metrics::Metrics<T>`).
fn type_name(ty: &syn::Type) -> String {
    match ty {
        syn::Type::Path(p) => p
            .path
            .segments
            .last()
            .map_or_else(|| "_".to_string(), |s| s.ident.to_string()),
        _ => "_".to_string(),
    }
}

impl Scan {
    fn record(&mut self, sig: &syn::Signature, body: &syn::Block) {
        let first = sig.fn_token.span.start().line;
        let last = body.brace_token.span.close().end().line;
        let name = match &self.self_type {
            Some(ty) => format!("{ty}::{}", sig.ident),
            None => sig.ident.to_string(),
        };
        self.functions.push(Function {
            line: first,
            name,
            lines: last + 1 - first,
        });
    }
}

impl<'ast> Visit<'ast> for Scan {
    fn visit_item_mod(&mut self, m: &'ast syn::ItemMod) {
        if !is_test(&m.attrs) {
            visit::visit_item_mod(self, m);
        } else if m.content.is_none() {
            self.test_modules.push(m.ident.to_string());
        }
    }

    fn visit_item_impl(&mut self, i: &'ast syn::ItemImpl) {
        if !is_test(&i.attrs) {
            let outer = self.self_type.replace(type_name(&i.self_ty));
            visit::visit_item_impl(self, i);
            self.self_type = outer;
        }
    }

    fn visit_item_trait(&mut self, t: &'ast syn::ItemTrait) {
        if !is_test(&t.attrs) {
            let outer = self.self_type.replace(t.ident.to_string());
            visit::visit_item_trait(self, t);
            self.self_type = outer;
        }
    }

    fn visit_item_fn(&mut self, f: &'ast syn::ItemFn) {
        if !is_test(&f.attrs) {
            // A function inside a method is named on its own.
            let outer = self.self_type.take();
            self.record(&f.sig, &f.block);
            visit::visit_item_fn(self, f);
            self.self_type = outer;
        }
    }

    fn visit_impl_item_fn(&mut self, f: &'ast syn::ImplItemFn) {
        if !is_test(&f.attrs) {
            self.record(&f.sig, &f.block);
            let outer = self.self_type.take();
            visit::visit_impl_item_fn(self, f);
            self.self_type = outer;
        }
    }

    fn visit_trait_item_fn(&mut self, f: &'ast syn::TraitItemFn) {
        if is_test(&f.attrs) {
            return;
        }
        if let Some(body) = &f.default {
            self.record(&f.sig, body);
        }
        let outer = self.self_type.take();
        visit::visit_trait_item_fn(self, f);
        self.self_type = outer;
    }
}

/// The functions of one source text outside test code, and its out-of-line test modules.
fn scan(source: &str) -> syn::Result<Scan> {
    let file = syn::parse_file(source)?;
    let mut scan = Scan::default();
    scan.visit_file(&file);
    Ok(scan)
}

/// Where the modules declared in `file` have their files: beside a crate root or `mod.rs`,
/// in a directory named after the file otherwise.
fn module_dir(file: &Path) -> PathBuf {
    let parent = file.parent().expect("a file has a directory");
    let name = file.file_name().and_then(|n| n.to_str()).unwrap_or("");
    let dir = parent.file_name().and_then(|n| n.to_str()).unwrap_or("");
    let crate_root = matches!(name, "lib.rs" | "main.rs") || matches!(dir, "bin" | "benches");
    if crate_root || name == "mod.rs" {
        parent.to_path_buf()
    } else {
        parent.join(file.file_stem().expect("a file has a stem"))
    }
}

/// Every function of the covered trees with a body, by its file relative to the root.
fn functions() -> Vec<(String, Function)> {
    let mut files = Vec::new();
    for tree in trees() {
        rust_files(&tree, &mut files);
    }
    let mut found = Vec::new();
    let mut test_only: Vec<PathBuf> = Vec::new();
    for file in &files {
        let text = std::fs::read_to_string(file).unwrap();
        let scan = scan(&text).unwrap_or_else(|e| panic!("{}: {e}", file.display()));
        for module in &scan.test_modules {
            let dir = module_dir(file);
            test_only.push(dir.join(format!("{module}.rs")));
            test_only.push(dir.join(module));
        }
        found.extend(scan.functions.into_iter().map(|f| (file.clone(), f)));
    }
    found.retain(|(file, _)| !test_only.iter().any(|t| file.starts_with(t)));
    let root = root().canonicalize().unwrap();
    found
        .into_iter()
        .map(|(file, f)| {
            let file = file.canonicalize().unwrap();
            let file = file.strip_prefix(&root).unwrap_or(&file).display();
            (file.to_string(), f)
        })
        .collect()
}

#[test]
fn no_function_is_longer_than_80_lines() {
    let all = functions();
    let pending = |file: &str, f: &Function| PENDING.contains(&(file, f.name.as_str()));
    let mut over: Vec<&(String, Function)> = all
        .iter()
        .filter(|(file, f)| f.lines > LIMIT && !pending(file, f))
        .collect();
    over.sort_by(|a, b| b.1.lines.cmp(&a.1.lines).then_with(|| a.0.cmp(&b.0)));
    let over: Vec<String> = over
        .iter()
        .map(|(file, f)| format!("{file}:{} fn {}: {} lines", f.line, f.name, f.lines))
        .collect();
    assert!(
        over.is_empty(),
        "{} function(s) over {LIMIT} lines (split each into named parts):\n{}",
        over.len(),
        over.join("\n")
    );
    let done: Vec<&(&str, &str)> = PENDING
        .iter()
        .filter(|(file, name)| {
            !all.iter()
                .any(|(f, func)| f == file && func.name == *name && func.lines > LIMIT)
        })
        .collect();
    assert!(
        done.is_empty(),
        "no longer over {LIMIT} lines, take off PENDING: {done:?}"
    );
}

/// The scanner itself: lengths count from `fn` to the closing brace, methods are named with
/// their type, and test code (a `#[cfg(test)]` module inline or in its own file, a
/// `#[test]` function, `#[cfg(all(test, …))]`) is left out.
#[test]
fn the_scan_counts_product_code_and_skips_test_code() {
    let body = |n: usize| "    let _ = 1;\n".repeat(n);
    let source = format!(
        "/// doc\n#[inline]\nfn long() {{\n{}}}\n\
         struct S;\nimpl S {{\n    pub fn method(&self) {{\n{}    }}\n}}\n\
         #[test]\nfn a_test() {{\n{}}}\n\
         #[cfg(all(test, unix))]\nfn unix_test() {{\n{}}}\n\
         #[cfg(not(test))]\nfn product() {{}}\n\
         #[cfg(test)]\nmod tests {{\n    fn helper() {{\n{}    }}\n}}\n\
         #[cfg(test)]\nmod cases;\n",
        body(90),
        body(3),
        body(90),
        body(90),
        body(90),
    );
    let scan = scan(&source).unwrap();
    assert_eq!(
        scan.functions,
        [
            Function {
                line: 3,
                name: "long".into(),
                lines: 92
            },
            Function {
                line: 97,
                name: "S::method".into(),
                lines: 5
            },
            Function {
                line: 290,
                name: "product".into(),
                lines: 1
            },
        ]
    );
    assert_eq!(scan.test_modules, ["cases"]);
    assert_eq!(
        module_dir(Path::new("crates/engine/src/rollout/mod.rs")),
        Path::new("crates/engine/src/rollout")
    );
    assert_eq!(
        module_dir(Path::new("crates/engine/src/plan/classify.rs")),
        Path::new("crates/engine/src/plan/classify")
    );
    assert_eq!(
        module_dir(Path::new("crates/engine/benches/plan.rs")),
        Path::new("crates/engine/benches")
    );
}
