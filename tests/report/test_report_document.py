"""Rendering report blocks to Markdown and self-contained HTML."""

from __future__ import annotations

from atpsim.report.document import (
    Bullets,
    Code,
    Details,
    Document,
    Figure,
    Heading,
    Paragraph,
    Table,
    to_html,
    to_markdown,
)


def document() -> Document:
    doc = Document("Run <1>")
    doc.add(
        Heading("Tables"),
        Paragraph("a & b"),
        Table(["x|y", "z"], [["1", "a|b"]], "cap"),
        Code("name: x\n", "yaml"),
    )
    return doc


def test_markdown_escapes_pipes_in_cells():
    md = to_markdown(document())
    # a "<" outside code is written &lt; (a Markdown viewer renders it "<", not as a tag)
    assert md.startswith("# Run &lt;1>\n\n## Tables\n\na & b\n\n**cap**\n\n")
    assert "| x\\|y | z |\n|---|---|\n| 1 | a\\|b |" in md
    assert "```yaml\nname: x\n```\n" in md


def test_html_escapes_text_and_embeds_figures(tmp_path):
    (tmp_path / "f.svg").write_text("<svg/>")
    doc = document()
    doc.add(Figure("f.png", "f.svg", "a <figure>"))
    page = to_html(doc, tmp_path)
    assert "<title>Run &lt;1&gt;</title>" in page and "<p>a &amp; b</p>" in page
    assert '<img alt="a &lt;figure&gt;" src="data:image/svg+xml;base64,PHN2Zy8+">' in page
    assert "<td>a|b</td>" in page and "http" not in page


def test_markdown_markup_renders_in_html_and_stays_in_markdown(tmp_path):
    """Backticks, bold, italic and links read as such in the page (no stray markup), while
    ``d1 * d2 = 8`` keeps its asterisk and report.md keeps the source text."""
    doc = Document("t")
    doc.add(Paragraph("Run `atpsim report <dir>`; **no** *match*, see [csv](results.csv); d1 * d2 = 8"))
    page = to_html(doc, tmp_path)
    assert (
        "<p>Run <code>atpsim report &lt;dir&gt;</code>; <strong>no</strong> <em>match</em>, "
        'see <a href="results.csv">csv</a>; d1 * d2 = 8</p>'
    ) in page
    assert "`" not in page and "**" not in page
    assert "Run `atpsim report <dir>`; **no**" in to_markdown(doc)


def test_tables_scroll_in_their_own_box_and_details_fold(tmp_path):
    doc = Document("t")
    doc.add(Details("All 2 points", [Table(["a", "b"], [["1", "x"], ["2.5", ""]])]), Bullets(["k"]))
    page = to_html(doc, tmp_path)
    assert '<meta name="viewport" content="width=device-width, initial-scale=1">' in page
    assert "<details><summary>All 2 points</summary>" in page
    assert '<div class="scroll"><table>' in page and "</table></div>" in page
    assert '<td class="n">2.5</td><td></td>' in page  # a column of numbers aligns right
    assert "<ul><li>k</li></ul>" in page
    md = to_markdown(doc)
    assert "<details><summary>All 2 points</summary>\n\n| a | b |" in md
    assert md.endswith("| 2.5 |  |\n\n</details>\n\n- k\n")
