#!/usr/bin/env node
// Plays Catch (catch.js) against repertory's remote environment service:
//
//   npm ci                 # once, in clients/node
//   REPERTORY_REMOTE_TOKEN=... node catch_client.js --address=127.0.0.1:50051 \
//       --seconds=60 --concurrent=4
//
// One gRPC session carries `--concurrent` episodes at a time. When the
// session is lost (the service restarted), the open episodes are dropped and
// the client reconnects and starts new ones. It stops at `--seconds`: no
// reconnection is tried after it, and a step in flight then waits at most
// GRACE_MS more. At the end it prints one JSON line: episodes, mean return
// of the last 100, actions, latency percentiles.
'use strict';

const fs = require('fs');
const path = require('path');
const grpc = require('@grpc/grpc-js');
const protoLoader = require('@grpc/proto-loader');
const {Catch, ROWS, COLUMNS, NUM_ACTIONS} = require('./catch');

const PROTO = path.join(__dirname, '..', '..', 'repertory', 'remote',
                        'environment.proto');

function parseArgs(argv) {
  const args = {address: '', address_file: '', token: '', seconds: 30,
                episodes: 0, concurrent: 1, seed: 1, hold_after: 0};
  for (const arg of argv) {
    const match = /^--([a-z_]+)=(.*)$/.exec(arg);
    if (!match || !(match[1] in args)) {
      throw new Error(`unknown argument ${arg}; known: ` +
                      Object.keys(args).map((k) => `--${k}`).join(' '));
    }
    args[match[1]] = typeof args[match[1]] === 'number' ? Number(match[2])
                                                        : match[2];
  }
  return args;
}

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));
const GRACE_MS = 2000;

// `promise`, or a rejection (code DEADLINE_EXCEEDED) at `deadline`.
function before(promise, deadline) {
  let timer;
  const late = new Promise((_, reject) => {
    timer = setTimeout(() => {
      const error = new Error('--seconds ran out');
      error.code = grpc.status.DEADLINE_EXCEEDED;
      reject(error);
    }, Math.max(deadline - Date.now(), 0));
  });
  return Promise.race([promise, late]).finally(() => clearTimeout(timer));
}

// One Session stream; step() resolves with the server's Action message.
class Session {
  constructor(service, metadata) {
    this.pending = new Map();  // episode id -> {resolve, reject}
    this.error = null;
    this.call = service.Session(metadata);
    this.welcome = new Promise((resolve, reject) => {
      this.call.on('data', (message) => {
        if (message.message === 'welcome') return resolve(message.welcome);
        const waiter = this.pending.get(Number(message.action.episode_id));
        if (waiter) {
          this.pending.delete(Number(message.action.episode_id));
          waiter.resolve(message.action);
        }
      });
      this.call.on('error', (error) => this.fail(error, reject));
      this.call.on('end', () => this.fail(new Error('session ended'), reject));
    });
  }

  fail(error, reject) {
    if (this.error) return;
    this.error = error;
    reject(error);
    for (const waiter of this.pending.values()) waiter.reject(error);
    this.pending.clear();
  }

  step(step) {
    if (this.error) return Promise.reject(this.error);
    return new Promise((resolve, reject) => {
      this.pending.set(step.episode_id, {resolve, reject});
      this.call.write({step});
    });
  }

  close() { this.call.end(); }
}

async function main() {
  const args = parseArgs(process.argv.slice(2));
  let address = args.address;
  const deadline = Date.now() + args.seconds * 1000;
  while (!address) {
    if (fs.existsSync(args.address_file)) {
      address = fs.readFileSync(args.address_file, 'utf8').trim();
    } else {
      await sleep(200);
    }
  }
  let token = args.token || process.env.REPERTORY_REMOTE_TOKEN || '';
  if (!token && args.address_file) {
    token = fs.readFileSync(path.join(path.dirname(args.address_file), 'token'),
                            'utf8').trim();
  }
  const definition = protoLoader.loadSync(PROTO, {
    keepCase: true, longs: Number, enums: String, defaults: true,
    oneofs: true});
  const proto = grpc.loadPackageDefinition(definition).repertory.remote.v1;
  const service = new proto.EnvironmentService(
      address, grpc.credentials.createInsecure());
  const metadata = new grpc.Metadata();
  metadata.set('authorization', `Bearer ${token}`);
  const hello = {
    specs: {observation: {shape: [ROWS, COLUMNS], dtype: 'float32'},
            num_actions: NUM_ACTIONS},
    client_name: `catch_client.js pid ${process.pid}`};

  let session = null;
  let connects = 0;
  async function connect() {
    let delay = 50;
    for (;;) {
      const candidate = new Session(service, metadata);
      candidate.call.write({hello});
      try {
        await before(candidate.welcome, deadline);
        connects += 1;
        return candidate;
      } catch (error) {
        candidate.call.cancel();
        if (error.code === grpc.status.UNAUTHENTICATED ||
            error.code === grpc.status.FAILED_PRECONDITION ||
            error.code === grpc.status.INVALID_ARGUMENT) {
          throw error;  // Refused: retrying cannot help.
        }
        if (Date.now() >= deadline) throw error;
        await sleep(delay);
        delay = Math.min(delay * 2, 1000);
      }
    }
  }
  let connecting = null;
  async function currentSession() {
    if (session && !session.error) return session;
    if (!connecting) {
      connecting = connect().then((s) => { session = s; connecting = null; });
    }
    await connecting;
    return session;
  }

  const returns = [];
  const latencies = [];
  let interrupted = 0;
  // Settles once --episodes are played: episodes still waiting for the
  // service's first action (it has fewer environments than --concurrent)
  // are then let go instead of waiting out --seconds.
  const ENOUGH = new Error('--episodes were played');
  let markEnough;
  const enough = new Promise((resolve) => { markEnough = resolve; });
  const enoughRejects = enough.then(() => { throw ENOUGH; });
  enoughRejects.catch(() => {});
  let nextId = 1;
  const started = Date.now();
  const encode = (board) => ({data: Buffer.from(board.buffer)});

  async function player(index) {
    const game = new Catch(args.seed * 1000 + index + 1);
    while (Date.now() < deadline &&
           !(args.episodes && returns.length >= args.episodes)) {
      let s;
      try {
        s = await before(currentSession(), deadline);
      } catch (error) {
        if (Date.now() >= deadline) break;  // --seconds ran out.
        throw error;
      }
      const id = nextId++;
      let total = 0;
      try {
        let t = process.hrtime.bigint();
        const step = (message) => Promise.race(
            [before(s.step(message), deadline + GRACE_MS), enoughRejects]);
        let answer = await step({episode_id: id,
                                 observation: encode(game.reset())});
        latencies.push(Number(process.hrtime.bigint() - t) / 1e6);
        for (let steps = 1; ; steps++) {
          const {observation, reward, terminal} = game.step(answer.action);
          total += reward;
          if (args.hold_after && index === 0 && steps === args.hold_after) {
            console.log('HOLDING');
            await sleep(3600 * 1000);
          }
          t = process.hrtime.bigint();
          answer = await step({episode_id: id, observation: encode(observation),
                               reward, terminal});
          latencies.push(Number(process.hrtime.bigint() - t) / 1e6);
          if (terminal) break;
        }
        returns.push(total);
        if (args.episodes && returns.length >= args.episodes) markEnough();
      } catch (error) {
        if (error === ENOUGH) break;
        if (error.code === grpc.status.UNAUTHENTICATED ||
            error.code === grpc.status.FAILED_PRECONDITION ||
            error.code === grpc.status.INVALID_ARGUMENT) {
          throw error;
        }
        interrupted += 1;
        console.error(`episode interrupted (${error.message}); starting a new one`);
      }
    }
  }

  await Promise.all(Array.from({length: args.concurrent}, (_, i) => player(i)));
  if (session) session.close();
  if (connecting) connecting.catch(() => {});
  const seconds = (Date.now() - started) / 1000;
  latencies.sort((a, b) => a - b);
  const percentile = (p) => latencies.length ?
      Number(latencies[Math.min(latencies.length - 1,
                                Math.floor(p / 100 * latencies.length))].toFixed(3)) : null;
  const last = returns.slice(-100);
  console.log(JSON.stringify({
    episodes: returns.length, actions: latencies.length, seconds,
    actions_per_s: Number((latencies.length / seconds).toFixed(1)),
    mean_return_last_100: last.length ? last.reduce((a, b) => a + b, 0) / last.length : null,
    latency_ms_p50: percentile(50), latency_ms_p99: percentile(99),
    interrupted_episodes: interrupted, connects}));
  service.close();
  process.exit(0);
}

main().catch((error) => {
  console.error(`catch_client.js: ${error.code !== undefined ? `status ${error.code}: ` : ''}${error.details || error.message}`);
  process.exit(1);
});
