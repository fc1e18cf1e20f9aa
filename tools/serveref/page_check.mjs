// Opens a diffattn server's chat page in headless Chromium, driven over the
// DevTools protocol (--remote-debugging-pipe: no extra package), waits (in
// real time, up to 60 s) until the reply to the message the URL sends
// (/?q=...) is finished, saves a screenshot and prints the page's messages as
// JSON: [{cls, text, done, chunks}], chunks being the stream events the page read.
//   node page_check.mjs CHROMIUM URL SCREENSHOT.png PROFILE_DIR
import fs from "fs";
import { openPage } from "./cdp.mjs";
const [, , chromium, url, shot, profile] = process.argv;
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
const { send, sessionId, close } = await openPage(chromium, profile, "900,700");
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
await close();
