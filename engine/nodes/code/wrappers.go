package code

// The wrappers are fixed programs given to the interpreter on its command line; the user's code
// and the input never are: they arrive as one JSON document {"code": …, "input": …} on stdin.
// They implement the result convention of the package documentation. The restricted backend
// follows the same convention without a wrapper (restricted.go).

// pythonWrapper runs the code with INPUT and prints `result` when the code set it.
const pythonWrapper = `import json, sys
def _plaita_main():
    req = json.loads(sys.stdin.buffer.read())
    sys.stdin = open("/dev/null")
    g = {"__name__": "__main__", "__builtins__": __builtins__, "INPUT": req.get("input")}
    exec(compile(req["code"], "<code>", "exec"), g)
    if "result" in g:
        out = json.dumps(g["result"], allow_nan=False)
        sys.stdout.write("\n" + out + "\n")
    sys.stdout.flush()
_plaita_main()
`

// jsWrapper runs the code as the body of an async function of INPUT (node). stdout writes to a
// pipe are synchronous in node on Linux, so exiting right after the last write loses nothing;
// exiting also ends code that left timers or sockets open.
const jsWrapper = `"use strict";
const fs = require("fs");
const req = JSON.parse(fs.readFileSync(0, "utf8"));
const AsyncFunction = Object.getPrototypeOf(async function () {}).constructor;
(async () => {
  const fn = new AsyncFunction("INPUT", req.code);
  const value = await fn(req.input === undefined ? null : req.input);
  if (value !== undefined) {
    const out = JSON.stringify(value);
    if (out === undefined) throw new TypeError("the returned value cannot be encoded as JSON");
    process.stdout.write("\n" + out + "\n");
  }
})().then(() => process.exit(0), (err) => {
  process.stderr.write((err && err.stack ? err.stack : String(err)) + "\n");
  process.exit(1);
});
`
