// Formulas: pymdownx.arithmatex (generic) wraps $...$ in span.arithmatex and $$...$$ in
// div.arithmatex; KaTeX, bundled in docs/assets/katex, draws them in the page.
function renderFormulas() {
  document.querySelectorAll(".arithmatex").forEach(function (el) {
    renderMathInElement(el, {
      delimiters: [
        { left: "\\(", right: "\\)", display: false },
        { left: "\\[", right: "\\]", display: true },
      ],
      throwOnError: false,
    });
  });
}
if (typeof document$ !== "undefined") {
  document$.subscribe(renderFormulas);
} else {
  document.addEventListener("DOMContentLoaded", renderFormulas);
}
