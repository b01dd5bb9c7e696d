"""Tests of scripts/module_cycles.py on small made-up crates.

usage: python3 -m unittest scripts/test_module_cycles.py    (from the repository root)
"""
import contextlib
import io
import os
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import module_cycles as mc  # noqa: E402


class Crate:
    """A made-up `src/` the script reads instead of the real one."""

    def __init__(self, files):
        self.dir = tempfile.TemporaryDirectory()
        for path, text in files.items():
            full = os.path.join(self.dir.name, path)
            os.makedirs(os.path.dirname(full), exist_ok=True)
            with open(full, "w") as f:
                f.write(text)

    def __enter__(self):
        self.saved, mc.SRC = mc.SRC, self.dir.name
        return self

    def __exit__(self, *_):
        mc.SRC = self.saved
        self.dir.cleanup()


def run(argv=()):
    """The script's exit code and output."""
    out, saved = io.StringIO(), sys.argv
    sys.argv = ["module_cycles.py", *argv]
    try:
        with contextlib.redirect_stdout(out):
            code = mc.main()
    finally:
        sys.argv = saved
    return code, out.getvalue()


RUN = {
    "lib.rs": "mod run;\nmod other;\n",
    "run/mod.rs": """mod a;
mod b;
pub struct Ingest { field: Field }
impl Ingest {
    pub fn top(&self) { self.from_a() }
    fn helper(&self) {}
}
""",
    "run/a.rs": """use super::Ingest;
impl Ingest {
    pub(super) fn from_a(&self) {
        self.from_b();
        self.field.only_in_b();     // a field's method: not a call through self
        let _ = "self.b_in_text(";  // text: not a call
    }
}
""",
    "run/b.rs": """use super::Ingest;
impl Ingest {
    pub(super) fn from_b(&self) { self.helper() }
    fn only_in_b(&self) {}
    fn b_in_text(&self) {}
}
#[cfg(test)]
mod tests {
    fn t(i: &super::Ingest) { i.from_a() }
}
""",
    "other.rs": "pub struct Other;\n",
}


class BlankTest(unittest.TestCase):
    def test_literals_and_comments_are_blanked(self):
        text = 'let u = "s3://b/{"; // self.x(\nlet c = \'{\'; fn f<\'a>(x: &\'a str) {} /* } */ r#"}"#'
        out = mc.blank(text)
        self.assertEqual(len(out), len(text))
        self.assertNotIn("self", out)
        self.assertEqual(out.count("{"), out.count("}"))
        self.assertIn("<'a>", out)
        self.assertIn("let c", out)

    def test_test_items_are_dropped(self):
        text = "fn kept() {}\n#[cfg(test)]\n#[allow(x)]\nfn gone() { {} }\n#[cfg(test)]\nmod t { fn gone2() {} }\nfn also() {}"
        out = mc.drop_test_items(text)
        self.assertIn("kept", out)
        self.assertIn("also", out)
        self.assertNotIn("gone", out)


class ImplTest(unittest.TestCase):
    def test_types_of_impl_blocks(self):
        text = mc.blank("""impl<'a> Opener<'a> { fn a(&self) { fn nested() {} } }
impl std::fmt::Display for crate::x::Thing<u8> { fn fmt(&self) {} }
impl<T: Fn() -> u8> Marker for T { fn m(&self) {} }
impl<H> Store
    for Hooked<H>
where
    H: Hook,
{ fn put(&self) {} }
fn f() -> impl Iterator<Item = u8> { None.into_iter() }
""")
        blocks = [(n, t, mc.methods_defined(b)) for n, t, b in mc.impl_blocks(text)]
        self.assertEqual(blocks, [
            ("Opener", False, {"a"}),
            ("Thing", True, {"fmt"}),
            (None, True, {"m"}),
            ("Hooked", True, {"put"}),
        ])

    def test_calls_through_self(self):
        body = "self.a(); self . b::<u8>(1); self.field.c(); self.d; Self::e(); x.map(Ingest::f); Self::G; y.self_g()"
        self.assertEqual(
            {m for _, m in mc.methods_called(body, "Ingest")}, {"a", "b", "e", "f"})


class EdgesTest(unittest.TestCase):
    def test_edges_circles_and_exit_code(self):
        with Crate(RUN):
            self.assertEqual(mc.self_call_edges(), {
                ("run/mod.rs", "run/a.rs"): {"self.from_a"},
                ("run/a.rs", "run/b.rs"): {"self.from_b"},
                ("run/b.rs", "run/mod.rs"): {"self.helper"},
            })
            code, out = run(["--graph"])
        self.assertEqual(code, 1)
        self.assertIn("calls through self: run/a.rs -> run/b.rs (self.from_b)", out)
        self.assertIn("file circle in src/run: a -> b (self.from_b); b -> mod (self.helper); "
                      "mod -> a (self.from_a)", out)
        self.assertIn("no import cycle among 2 modules", out)

    def test_one_way_is_no_circle(self):
        files = dict(RUN)
        files["run/b.rs"] = "use super::Ingest;\nimpl Ingest {\n    pub(super) fn from_b(&self) {}\n}\n"
        with Crate(files):
            code, out = run()
        self.assertEqual(code, 0)
        self.assertIn("no file circle", out)

    def test_both_ways_between_siblings(self):
        files = dict(RUN)
        files["run/b.rs"] = "use super::Ingest;\nimpl Ingest {\n    pub(super) fn from_b(&self) { self.from_a() }\n}\n"
        with Crate(files):
            code, out = run()
        self.assertEqual(code, 1)
        self.assertIn("both ways in src/run: a <-> b", out)

    def test_module_cycle_through_self(self):
        files = dict(RUN)
        files["other.rs"] = "impl crate::run::Ingest {\n    pub(crate) fn o(&self) { self.top() }\n}\n"
        files["run/b.rs"] = "use super::Ingest;\nimpl Ingest {\n    pub(super) fn from_b(&self) { self.o() }\n}\n"
        with Crate(files):
            code, out = run()
        self.assertEqual(code, 1)
        self.assertIn("cycle of 2 modules: other -> run (path; self.top); run -> other (self.o)", out)

    def test_types_of_one_name_stay_apart(self):
        files = {
            "lib.rs": "mod x;\nmod y;\n",
            "x.rs": "struct Entry;\nimpl Entry { fn a(&self) { self.b() } }\n",
            "y.rs": "struct Entry;\nimpl Entry { fn b(&self) { self.a() } }\n",
        }
        with Crate(files):
            self.assertEqual(mc.self_call_edges(), {})

    def test_inherent_method_before_trait_method(self):
        files = {
            "lib.rs": "mod t;\n",
            "t/mod.rs": "mod a;\nmod b;\nstruct T;\nimpl T { fn run(&self) { self.go() } }\n",
            "t/a.rs": "impl super::T { pub(super) fn go(&self) {} }\n",
            "t/b.rs": "impl Go for super::T { fn go(&self) {} }\n",
        }
        with Crate(files):
            self.assertEqual(mc.self_call_edges(), {("t/mod.rs", "t/a.rs"): {"self.go"}})


if __name__ == "__main__":
    unittest.main()
