// Node's fetch (undici, what OpenAI's JavaScript client uses) posting a body
// of N bytes to diffattn serve, for tests/cli_serve_http.sh. Prints the status
// and the error type it reads, or "error CODE" when it reads no answer.
//   node serve_fetch.mjs PORT N KEY [paced]
// paced: the body in 100 KB pieces 10 ms apart, its Content-Length announced,
// so that the client is still sending when a server that answers early closes.
const [port, n, key, paced] = [process.argv[2], +process.argv[3], process.argv[4], process.argv[5] === 'paced'];
let body = 'x'.repeat(n);
if (paced) {
  const piece = new Uint8Array(100000).fill(120);
  let sent = 0;
  body = new ReadableStream({
    async pull(ctl) {
      if (sent >= n) return ctl.close();
      await new Promise(r => setTimeout(r, 10));
      ctl.enqueue(piece.subarray(0, Math.min(piece.length, n - sent)));
      sent += piece.length;
    }
  });
}
try {
  const r = await fetch(`http://127.0.0.1:${port}/v1/completions`, {
    method: 'POST', body, duplex: 'half',
    headers: {'Content-Type': 'application/json', 'Content-Length': String(n), 'Authorization': `Bearer ${key}`}});
  const j = await r.json();
  console.log(r.status, j.error ? j.error.type : 'ok');
} catch (e) {
  console.log('error', e.cause ? e.cause.code : e.message);
}
