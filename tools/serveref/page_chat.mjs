// Holds a conversation in diffattn serve's chat page, in headless Chromium
// driven over the DevTools protocol (--remote-debugging-pipe: no extra package):
// three turns typed and sent as a user would, a screenshot; a reload (the
// conversation must come back from localStorage); a fourth message whose reply
// is stopped with the Stop button after its third stream event, a screenshot.
// Prints one JSON object: {turns, bodies, rendered, reloaded, stopped, after_stop}
//   rendered: the page's HTML for a reply holding a code fence, a code span and markup
//   turns, reloaded, after_stop: the page's messages [{cls, text, done, stopped, chunks}]
//   bodies: the message counts of the requests the page sent (from a wrapped fetch)
//   node page_chat.mjs CHROMIUM URL SHOT_TURNS.png SHOT_STOPPED.png PROFILE_DIR
import fs from "fs";
import { openPage } from "./cdp.mjs";
const [, , chromium, url, shotTurns, shotStopped, profile] = process.argv;
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
const { send, sessionId, close } = await openPage(chromium, profile, "900,900");
const evaluate = async (expression) => {
  const r = await send("Runtime.evaluate", { expression, returnByValue: true, awaitPromise: true }, sessionId);
  if (r.result?.exceptionDetails) throw new Error(JSON.stringify(r.result.exceptionDetails));
  return r.result?.result?.value;
};
const read = () => evaluate("JSON.stringify([...document.querySelectorAll('#log > div')].map(d => ({cls: d.className, " +
  "text: d.dataset.text ?? d.textContent, done: d.dataset.done ?? null, stopped: d.dataset.stopped ?? null, " +
  "chunks: Number(d.dataset.chunks ?? 0)})))").then((v) => JSON.parse(v ?? "[]"));
const load = async () => {
  await send("Page.navigate", { url }, sessionId);
  for (const end = Date.now() + 20000; Date.now() < end; await sleep(100))
    if (await evaluate("document.readyState === 'complete' && !!document.getElementById('msg')")) break;
  /* every request body the page sends, for the test to count its messages */
  await evaluate("window.__bodies = []; const f = window.fetch; window.fetch = (u, o) => { " +
    "if (o && o.body) window.__bodies.push(JSON.parse(o.body).messages?.length ?? -1); return f(u, o); }; true");
};
const waitDone = async (count) => {
  for (const end = Date.now() + 60000; Date.now() < end; await sleep(100)) {
    const s = await read();
    if (s.length >= count && s[count - 1].done === "1") return s;
  }
  return read();
};
const type = (text) => evaluate(`(() => { const m = document.getElementById('msg'); m.value = ${JSON.stringify(text)}; ` +
  "document.getElementById('send').click(); return true; })()");
const shot = async (file) => {
  const s = await send("Page.captureScreenshot", { format: "png" }, sessionId);
  fs.writeFileSync(file, Buffer.from(s.result.data, "base64"));
};

await send("Page.enable", {}, sessionId);
await load();
await evaluate("document.getElementById('clear').click(); true");
await evaluate("(() => { const t = document.getElementById('max-tokens'); t.value = '24'; t.dispatchEvent(new Event('change')); return true; })()");
const questions = ["Hello there", "Write `x = 1` in code", "And a third turn"];
for (let i = 0; i < questions.length; i++) {
  await type(questions[i]);
  await waitDone(2 * i + 2);
}
const turns = await read();
/* how the page renders a reply with code: a fence with its language, a span, and markup kept as text */
const rendered = await evaluate("render('Try `f(x)`:\\n```c\\nint x = a < b;\\n```\\n<b>done</b>')");
const bodies = await evaluate("window.__bodies");
await shot(shotTurns);
await load();
const reloaded = await read();
/* the fourth reply: long, stopped after its third stream event */
await evaluate("(() => { const t = document.getElementById('max-tokens'); t.value = '2000'; t.dispatchEvent(new Event('change')); return true; })()");
await type("Now a long answer, please");
const stopped = await evaluate(`new Promise((resolve) => {
  const t0 = Date.now();
  const poll = () => {
    const out = [...document.querySelectorAll('#log > div')].pop();
    if (out && out.className === 'assistant' && Number(out.dataset.chunks) >= 3) {
      document.getElementById('stop').click(); resolve(true);
    } else if (Date.now() - t0 > 30000) resolve(false); else setTimeout(poll, 5);
  };
  poll();
})`);
const afterStop = await waitDone(8);
await shot(shotStopped);
process.stdout.write(JSON.stringify({ turns, bodies, rendered, reloaded, stopped, after_stop: afterStop }) + "\n");
await close();
