// Opens a diffattn server's chat page in headless Chromium, driven over the
// DevTools protocol (--remote-debugging-pipe: no extra package), waits (in
// real time, up to 60 s) until the reply to the message the URL sends
// (/?q=...) is finished, saves a screenshot and prints the page's messages as
// JSON: [{cls, text, done, chunks}], chunks being the stream events the page read.
//   node page_check.mjs CHROMIUM URL SCREENSHOT.png PROFILE_DIR
import { spawn } from "child_process";
import fs from "fs";
const [, , chromium, url, shot, profile] = process.argv;
const p = spawn(chromium, ["--headless", "--no-sandbox", "--disable-gpu", "--remote-debugging-pipe",
  `--user-data-dir=${profile}`, "--window-size=900,700", "about:blank"], { stdio: ["ignore", "ignore", "ignore", "pipe", "pipe"] });
const toBrowser = p.stdio[3], fromBrowser = p.stdio[4];
let next = 0, buf = "";
const pending = new Map();
fromBrowser.on("data", (d) => {
  buf += d;
  for (let i; (i = buf.indexOf("\0")) >= 0; buf = buf.slice(i + 1)) {
    const m = JSON.parse(buf.slice(0, i));
    if (m.id && pending.has(m.id)) { pending.get(m.id)(m); pending.delete(m.id); }
  }
});
const send = (method, params = {}, sessionId) => new Promise((resolve) => {
  const id = ++next;
  pending.set(id, resolve);
  toBrowser.write(JSON.stringify({ id, method, params, sessionId }) + "\0");
});
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
const { result: { targetId } } = await send("Target.createTarget", { url: "about:blank" });
const { result: { sessionId } } = await send("Target.attachToTarget", { targetId, flatten: true });
await send("Page.enable", {}, sessionId);
await send("Page.navigate", { url }, sessionId);
const read = "JSON.stringify([...document.querySelectorAll('#log div')].map(d => " +
  "({cls: d.className, text: d.textContent, done: d.dataset.done ?? null, chunks: Number(d.dataset.chunks ?? 0)})))";
let state = [];
for (const end = Date.now() + 60000; Date.now() < end; await sleep(100)) {
  const r = await send("Runtime.evaluate", { expression: read, returnByValue: true }, sessionId);
  state = JSON.parse(r.result?.result?.value ?? "[]");
  if (state.some((m) => m.cls !== "user" && m.done === "1")) break;
}
const s = await send("Page.captureScreenshot", { format: "png" }, sessionId);
fs.writeFileSync(shot, Buffer.from(s.result.data, "base64"));
process.stdout.write(JSON.stringify(state) + "\n");
await send("Browser.close");
p.kill();
