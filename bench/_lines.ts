/** Line splitting for the benches that talk to a child process over stdout. */

/** A stream transform that yields complete lines. */
export function splitLines(): TransformStream<string, string> {
  let buf = "";
  return new TransformStream({
    transform(chunk, ctl) {
      buf += chunk;
      let i;
      while ((i = buf.indexOf("\n")) >= 0) {
        ctl.enqueue(buf.slice(0, i));
        buf = buf.slice(i + 1);
      }
    },
  });
}
