// Reads dtsim's Chrome traces with the trace engine of Chrome DevTools'
// Performance panel (npm @paulirish/trace_engine, installed by
// scripts/bootstrap.sh) and checks that a viewer keeps them whole:
//  - every complete event ("X") is in the engine's per-thread tree, at
//    depth 0: a slice that overlaps another on its thread is left out of
//    the tree by DevTools and dropped by Perfetto;
//  - every timestamp and duration is a whole number of nanoseconds, and
//    rounded to the nanosecond as Perfetto rounds them, no two slices of a
//    thread overlap;
//  - every thread with slices is named and no named thread is empty;
//  - every flow ("s" then "f") binds, as Perfetto binds it, to a slice that
//    encloses its timestamp on its thread, and the engine links every flow
//    whose two ends start at different times to two slices (DevTools keys a
//    flow's steps by timestamp, so it cannot show a send and a receive that
//    start together; Perfetto can).
// Usage: node trace_check.mjs ENGINE_DIR TRACE.json...
// Prints one line per trace; exits 1 on the first trace that fails.
import fs from 'node:fs';
import path from 'node:path';
import {pathToFileURL} from 'node:url';

const [engineDir, ...traces] = process.argv.slice(2);
if (!engineDir || traces.length === 0) {
  console.error('usage: node trace_check.mjs ENGINE_DIR TRACE.json...');
  process.exit(2);
}
// The engine's geometry helpers use the browser's DOMRect.
globalThis.DOMRect ??= class DOMRect {
  constructor(x = 0, y = 0, width = 0, height = 0) { Object.assign(this, {x, y, width, height}); }
};
const Trace = await import(pathToFileURL(path.join(engineDir, 'models/trace/trace.js')).href);

function fail(file, message) {
  console.log(`${file}: FAILED: ${message}`);
  process.exit(1);
}

const nanoseconds = (us) => Math.round(us * 1000);
const isWholeNanoseconds = (us) => Math.abs(us * 1000 - Math.round(us * 1000)) < 1e-3;
const threadKey = (pid, tid) => `${pid}/${tid}`;

for (const file of traces) {
  const name = path.basename(file);
  const events = JSON.parse(fs.readFileSync(file, 'utf8')).traceEvents;
  if (!Array.isArray(events)) fail(name, 'no traceEvents array');

  const slicesByThread = new Map();
  const namedThreads = new Set();
  const flowEnds = new Map();  // id -> {s, f}
  for (const e of events) {
    if (e.ph === 'M' && e.name === 'thread_name') namedThreads.add(threadKey(e.pid, e.tid));
    if (e.ph === 's' || e.ph === 'f') {
      if (!flowEnds.has(e.id)) flowEnds.set(e.id, {});
      flowEnds.get(e.id)[e.ph] = e;
    }
    if (e.ph !== 'X') continue;
    if (!isWholeNanoseconds(e.ts) || !isWholeNanoseconds(e.dur)) {
      fail(name, `"${e.name}" at ts ${e.ts} us, dur ${e.dur} us is not a whole number of nanoseconds`);
    }
    const key = threadKey(e.pid, e.tid);
    if (!slicesByThread.has(key)) slicesByThread.set(key, []);
    slicesByThread.get(key).push(e);
  }
  for (const key of slicesByThread.keys()) {
    if (!namedThreads.has(key)) fail(name, `thread ${key} has slices and no thread_name`);
  }
  for (const key of namedThreads) {
    if (!slicesByThread.has(key)) fail(name, `thread ${key} is named and has no slice`);
  }
  let slices = 0;
  for (const [key, list] of slicesByThread) {
    slices += list.length;
    list.sort((a, b) => nanoseconds(a.ts) - nanoseconds(b.ts));
    for (let i = 1; i < list.length; ++i) {
      const before = list[i - 1], after = list[i];
      if (nanoseconds(before.ts) + nanoseconds(before.dur) > nanoseconds(after.ts)) {
        fail(name, `on thread ${key}, "${after.name}" at ${after.ts} us starts before "${before.name}" ends`);
      }
    }
  }

  let flowsAtDifferentTimes = 0;
  for (const [id, ends] of flowEnds) {
    if (!ends.s || !ends.f) fail(name, `flow ${id} lacks its ${ends.s ? 'end ("f")' : 'start ("s")'}`);
    for (const end of [ends.s, ends.f]) {
      const ts = nanoseconds(end.ts);
      const enclosing = (slicesByThread.get(threadKey(end.pid, end.tid)) ?? []).find(
          (x) => nanoseconds(x.ts) <= ts && ts <= nanoseconds(x.ts) + nanoseconds(x.dur) && x.cat === end.cat);
      if (!enclosing) fail(name, `flow ${id}'s "${end.ph}" at ${end.ts} us is in no slice of thread ${threadKey(end.pid, end.tid)}`);
    }
    if (ends.s.ts !== ends.f.ts) ++flowsAtDifferentTimes;
  }

  const model = Trace.TraceModel.Model.createWithAllHandlers();
  await model.parse(events);
  const data = model.parsedTrace().data;
  let kept = 0;
  for (const [pid, process] of data.Renderer.processes) {
    for (const [tid, thread] of process.threads) {
      const expected = slicesByThread.get(threadKey(pid, tid))?.length ?? 0;
      let inTree = 0;
      const walk = (node) => {
        if (node.depth !== 0) fail(name, `DevTools nests "${node.entry.name}" on thread ${threadKey(pid, tid)}`);
        ++inTree;
        node.children.forEach(walk);
      };
      (thread.tree?.roots ?? []).forEach(walk);
      if (inTree !== expected) {
        fail(name, `DevTools keeps ${inTree} of the ${expected} slices of thread ${threadKey(pid, tid)}`);
      }
      kept += inTree;
    }
  }
  if (kept !== slices) fail(name, `DevTools keeps ${kept} of ${slices} slices`);

  const flows = data.Flows.flows;
  if (flows.length !== flowsAtDifferentTimes) {
    fail(name, `DevTools links ${flows.length} of the ${flowsAtDifferentTimes} flows whose ends start apart`);
  }
  for (const flow of flows) {
    if (flow.length !== 2 || flow.some((e) => e.ph !== 'X')) fail(name, 'a flow is not bound to a sender and a receiver slice');
  }
  console.log(`${name}: ${slices} slices on ${slicesByThread.size} threads, all kept; ` +
              `${flowEnds.size} flows bound (${flows.length} linked by DevTools)`);
}
