// The card's rules that need no browser: markdown, links, embed heights.
// The browser tests (examples/browser/card.test.mjs) render them.
import { test } from "node:test";
import assert from "node:assert/strict";
import { markdownHTML, safeURL, frameURL, embedHeight, escapeHTML, EMBED_MAX_PX } from "./card.js";

test("raw HTML in markdown is text", () => {
  for (const [src, want] of [
    ["<script>alert(1)</script>", "&lt;script&gt;alert(1)&lt;/script&gt;"],
    ["hi <img src=x onerror=alert(1)> there", "hi &lt;img src=x onerror=alert(1)&gt; there"],
    ['<a href="javascript:alert(1)">x</a>', "&lt;a href=&quot;javascript:alert(1)&quot;&gt;x&lt;/a&gt;"],
    ["<!-- hidden -->", "&lt;!-- hidden --&gt;"],
  ]) {
    const html = markdownHTML(src);
    assert.ok(html.includes(want), `${src} -> ${html}`);
    assert.ok(!/<(script|img|a )/i.test(html), `${src} -> ${html}`);
  }
});

test("only absolute http, https and mailto are links", () => {
  const cases = [
    ["[go](https://go.dev)", '<a href="https://go.dev/" target="_blank" rel="noopener noreferrer">go</a>'],
    ["[me](mailto:a@example.com)", '<a href="mailto:a@example.com" target="_blank" rel="noopener noreferrer">me</a>'],
    ["<http://example.com/a?b=1&c=2>", '<a href="http://example.com/a?b=1&amp;c=2" target="_blank" rel="noopener noreferrer">http://example.com/a?b=1&amp;c=2</a>'],
    ["[x](javascript:alert(1))", "x"],
    ["[x](JaVaScRiPt:alert(1))", "x"],
    ["[x](java\tscript:alert(1))", "x"],
    ["[x](data:text/html,hi)", "x"],
    ["[x](/relative/path)", "x"],
    ["[x](relative)", "x"],
    ["[x](//evil.example/p)", "x"],
    ["[x](file:///etc/passwd)", "x"],
    ["[x](vbscript:msgbox)", "x"],
    ['[x](https://e.example/ "t\\"onmouseover=\\"1")', 'title="t&quot;onmouseover=&quot;1"'],
  ];
  for (const [src, want] of cases) {
    const html = markdownHTML(src);
    assert.ok(html.includes(want), `${src} -> ${html}`);
    if (!want.startsWith("<a") && !want.startsWith("title")) assert.ok(!html.includes("<a"), `${src} -> ${html}`);
  }
});

test("an image is a link to it, never loaded", () => {
  assert.equal(markdownHTML("![cat](https://img.example/c.png)"),
    '<p><a href="https://img.example/c.png" target="_blank" rel="noopener noreferrer">cat</a></p>\n');
  assert.equal(markdownHTML("![cat](javascript:1)"), "<p>cat</p>\n");
  assert.ok(!markdownHTML('![x" onerror="alert(1)](https://i.example/)').includes('" onerror'));
});

test("safeURL", () => {
  assert.equal(safeURL("https://go.dev"), "https://go.dev/");
  assert.equal(safeURL("mailto:x@example.com"), "mailto:x@example.com");
  for (const bad of ["", "/a", "a", "javascript:1", " javascript:1", "https:", "ftp://x.example/", null, undefined, {}]) {
    assert.equal(safeURL(bad), "", String(bad));
  }
});

test("embed heights are capped at 70% of the viewport and never below 1 px", () => {
  assert.equal(embedHeight(300, 1000), 300);
  assert.equal(embedHeight(5000, 1000), 700);
  assert.equal(embedHeight(0, 1000), 1);
  assert.equal(embedHeight(-50, 1000), 1);
  assert.equal(embedHeight(300.6, 1000), 301);
  for (const bad of [NaN, Infinity, "300", null, undefined, {}]) assert.equal(embedHeight(bad, 1000), null);
  assert.equal(embedHeight(500, 0), 1);
});

test("without a viewport share an embed gets what it asks, within EMBED_MAX_PX", () => {
  // The MCP Apps view: the host sizes the page to the embed, so 70% of a
  // 150 px frame must not shrink a 300 px embed to 105.
  for (const share of [0, null, -1, NaN]) {
    assert.equal(embedHeight(300, 150, share), 300, String(share));
    assert.equal(embedHeight(1e12, 150, share), EMBED_MAX_PX, String(share));
    assert.equal(embedHeight(-5, 150, share), 1, String(share));
    assert.equal(embedHeight("300", 150, share), null, String(share));
  }
  assert.equal(EMBED_MAX_PX, 10000);
  // A share still caps, and so does EMBED_MAX_PX under a tall viewport.
  assert.equal(embedHeight(300, 150, 0.7), 105);
  assert.equal(embedHeight(50000, 100000), EMBED_MAX_PX);
});

test("escapeHTML", () => {
  assert.equal(escapeHTML(`<a href="x" title='y'>&</a>`), "&lt;a href=&quot;x&quot; title=&#39;y&#39;&gt;&amp;&lt;/a&gt;");
});

test("only http(s) embeds are framed, and only on the origins the page gave", () => {
  for (const bad of ["javascript:alert(1)", "data:text/html,<script>1</script>", "blob:https://a.example/x", "mailto:a@example.com",
    "//evil.example/x", "/relative", "file:///etc/passwd", "", null, undefined, {}]) {
    assert.equal(frameURL(bad), "", String(bad));
  }
  assert.equal(frameURL("https://a.example/card?x=1"), "https://a.example/card?x=1");
  const origins = ["https://a.example", "http://127.0.0.1:8080/"];
  assert.equal(frameURL("https://a.example/c", origins), "https://a.example/c");
  assert.equal(frameURL("https://A.EXAMPLE:443/c", origins), "https://a.example/c");
  assert.equal(frameURL("http://127.0.0.1:8080/app/c", origins), "http://127.0.0.1:8080/app/c");
  for (const bad of ["http://a.example/c", "https://a.example:8443/c", "https://a.example.evil.example/c", "https://evil.example/c",
    "http://127.0.0.1:9/c", "javascript:alert(1)"]) {
    assert.equal(frameURL(bad, origins), "", bad);
  }
  assert.equal(frameURL("https://a.example/c", []), "", "an empty list frames nothing");
  assert.equal(frameURL("https://a.example/c", "https://a.example"), "", "a string is no list");
  assert.equal(frameURL("javascript:1", ["javascript:1"]), "", "an origin that is not http(s) is none");
});
