// A real headless Chromium (Debian's), driven by playwright-core, controlled line by line over
// stdin/stdout so that the test logic lives in pytest (tests/browser/driver.py).
//
// Each input line is a JSON command {id, op, ...}; each output line answers it:
// {id, ok: true, value} or {id, ok: false, error}. Page errors and console errors are collected
// and returned by the `problems` op, so a test can assert that the page raised none.
//
// ops: goto {url} | click {selector} | fill {selector, value} | select {selector, value}
//      | press {selector, key} | wait {expression, timeout_ms} | eval {expression}
//      | screenshot {path} | problems | close

import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import readline from 'node:readline';
import { chromium } from 'playwright-core';

const executablePath = process.env.VOICESTREAM_CHROMIUM || '/usr/bin/chromium';
const userDataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'voicestream-chromium-'));
const args = [
  '--headless',
  '--no-sandbox',
  '--disable-gpu',
  '--disable-quic',
  '--no-first-run',
  '--disable-background-networking',
  '--disable-component-update',
  '--disable-sync',
  '--autoplay-policy=no-user-gesture-required',
];

const problems = [];
const context = await chromium.launchPersistentContext(userDataDir, {
  executablePath,
  args,
  headless: true,
  viewport: { width: 1100, height: 900 },
});
const page = context.pages()[0] ?? (await context.newPage());
page.on('pageerror', (error) => problems.push(`pageerror: ${error.message}`));
page.on('console', (message) => {
  if (message.type() === 'error') problems.push(`console.error: ${message.text()}`);
});

// An expression string becomes a function body, so tests can write `window.voicestream.stats`.
const asFunction = (expression) => new Function(`return (${expression});`);

const ops = {
  goto: ({ url }) => page.goto(url, { waitUntil: 'load' }).then((response) => response?.status() ?? null),
  click: ({ selector }) => page.click(selector),
  fill: ({ selector, value }) => page.fill(selector, value),
  select: ({ selector, value }) => page.selectOption(selector, value).then(() => null),
  press: ({ selector, key }) => page.press(selector, key),
  wait: ({ expression, timeout_ms = 60000 }) =>
    page.waitForFunction(asFunction(expression), null, { timeout: timeout_ms, polling: 50 }).then(() => true),
  eval: ({ expression }) => page.evaluate(asFunction(expression)),
  screenshot: ({ path: file }) => {
    fs.mkdirSync(path.dirname(file), { recursive: true });
    return page.screenshot({ path: file, fullPage: true }).then(() => file);
  },
  problems: () => problems.splice(0),
};

async function close() {
  await context.close().catch(() => {});
  fs.rmSync(userDataDir, { recursive: true, force: true });
}

const send = (message) => process.stdout.write(`${JSON.stringify(message)}\n`);
send({ id: 0, ok: true, value: { ready: true, chromium: context.browser()?.version() ?? null } });

const lines = readline.createInterface({ input: process.stdin });
for await (const line of lines) {
  if (!line.trim()) continue;
  const command = JSON.parse(line);
  if (command.op === 'close') break;
  const op = ops[command.op];
  try {
    if (!op) throw new Error(`unknown op ${command.op}`);
    send({ id: command.id, ok: true, value: (await op(command)) ?? null });
  } catch (error) {
    send({ id: command.id, ok: false, error: String(error?.message ?? error) });
  }
}
await close();
send({ id: -1, ok: true, value: 'closed' });
