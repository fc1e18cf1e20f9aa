// Headless Chromium driven over the DevTools protocol (--remote-debugging-pipe:
// no extra package), one page attached: the driver page_check.mjs and
// page_chat.mjs share.
//   const { send, sessionId, close } = await openPage(chromium, profileDir, "900,700");
import { spawn } from "child_process";

export async function openPage(chromium, profile, size) {
  const p = spawn(chromium, ["--headless", "--no-sandbox", "--disable-gpu", "--remote-debugging-pipe",
    `--user-data-dir=${profile}`, `--window-size=${size}`, "about:blank"], { stdio: ["ignore", "ignore", "ignore", "pipe", "pipe"] });
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
  const { result: { targetId } } = await send("Target.createTarget", { url: "about:blank" });
  const { result: { sessionId } } = await send("Target.attachToTarget", { targetId, flatten: true });
  const close = async () => { await send("Browser.close"); p.kill(); };
  return { send, sessionId, close };
}
