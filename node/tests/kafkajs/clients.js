// kafkajs (a pure JavaScript Kafka client, none of librdkafka's or the Java client's code)
// against a Skein cluster, driven by node/tests/kafka_kafkajs.rs:
//
//   node clients.js BOOTSTRAP
//
// Topics (made by the Rust test): t (1 partition, RF 3), tg (4 partitions), tz (1).
// 1. limit: a consumer with maxBytesPerPartition and maxBytes 8192 reads every record of
//    t from offset 0 (the leader's epoch marker), each batch ~15 KB.
// 2. out-of-range: a consumer seeks t-0 past its end; kafkajs resets by committing -1
//    and must go on (no crash) and read t from the beginning again.
// 3. gzip: a gzip-compressed produce to tz reads back (stored gzip-compressed).
// 4. group: two members share tg's 4 partitions, one leaves (rebalance), the other reads
//    the rest; a third member of the group later resumes from the commits.
// Then it prints READY and waits for a line on stdin: the Rust test kills t-0's leader
// (kill -9). 5. leader change: the consumer of step 1 reads a new batch written through
// the new leader (whose marker sits where the consumer stands).
// Each step's findings go to stdout as one JSON line at the end; progress to stderr.

'use strict'
const { Kafka, logLevel, CompressionTypes } = require('kafkajs')
const readline = require('readline')

const bootstrap = process.argv[2].split(',')
const LIMIT = 8192
const PER_BATCH = 5
const VALUE = 'x'.repeat(3000)

const kafka = new Kafka({
  clientId: 'skein-kafkajs',
  brokers: bootstrap,
  logLevel: logLevel.NOTHING,
  retry: { retries: 30, initialRetryTime: 300, maxRetryTime: 3000 },
})

const log = (...a) => console.error(new Date().toISOString(), ...a)
const sleep = (ms) => new Promise((r) => setTimeout(r, ms))

async function waitFor(what, ms, cond) {
  const end = Date.now() + ms
  while (!cond()) {
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`)
    await sleep(50)
  }
}

// One send() of PER_BATCH records `tag-i`: one batch of ~15 KB.
async function produceBatch(producer, topic, tag, compression) {
  const messages = []
  for (let i = 0; i < PER_BATCH; i++) messages.push({ value: `${tag}-${i}-${VALUE}` })
  await producer.send({ topic, acks: -1, messages, compression })
}

const short = (m) => m.value.toString().split('-').slice(0, 2).join('-')

function consumer(groupId, extra = {}) {
  const c = kafka.consumer({
    groupId,
    sessionTimeout: 10000,
    rebalanceTimeout: 10000,
    heartbeatInterval: 500,
    maxWaitTimeInMs: 200,
    retry: { retries: 30, initialRetryTime: 300, maxRetryTime: 3000 },
    ...extra,
  })
  // A crash kafkajs does not restart from is fatal to the application (what the -1
  // commit caused); one it restarts from (a dead broker's connection) is only logged.
  c.crashes = []
  c.on(c.events.CRASH, (e) => {
    const msg = String(e.payload.error && e.payload.error.message)
    log(groupId, 'crash', msg, 'restart:', e.payload.restart)
    if (!e.payload.restart) c.crashes.push(msg)
  })
  return c
}

async function limitStep(producer, out) {
  for (const tag of ['a', 'b', 'c', 'd']) await produceBatch(producer, 't', tag)
  const c = consumer('js-limit', { maxBytesPerPartition: LIMIT, maxBytes: LIMIT })
  const read = []
  const offsets = []
  await c.connect()
  await c.subscribe({ topic: 't', fromBeginning: true })
  await c.run({
    eachMessage: async ({ message }) => {
      read.push(short(message))
      offsets.push(Number(message.offset))
    },
  })
  try {
    await waitFor('20 records of t', 40000, () => read.length >= 4 * PER_BATCH)
  } catch (e) {
    log('limit:', e.message, read.length)
  }
  out.limit = { read: read.slice(), first_offset: offsets[0], crashes: c.crashes }
  return { c, read }
}

async function outOfRangeStep(out) {
  const c = consumer('js-oor')
  const read = []
  let before = 0
  let seeked = false
  await c.connect()
  await c.subscribe({ topic: 't', fromBeginning: true })
  await c.run({
    eachMessage: async ({ message }) => {
      if (seeked) read.push(short(message))
      else before++
    },
  })
  // Once it has read t, send it far past the end: kafkajs commits the seek, gets
  // OFFSET_OUT_OF_RANGE, and resets by committing -1 (fromBeginning: the earliest).
  await waitFor('t before the seek', 30000, () => before >= 4 * PER_BATCH)
  seeked = true
  c.seek({ topic: 't', partition: 0, offset: '1000000' })
  try {
    await waitFor('t again after the out-of-range seek', 30000, () => read.length >= 4 * PER_BATCH)
  } catch (e) {
    log('out-of-range:', e.message)
  }
  out.out_of_range = { read_after_seek: read.length, crashes: c.crashes }
  await c.disconnect()
}

async function gzipStep(producer, out) {
  let error = null
  try {
    await produceBatch(producer, 'tz', 'z', CompressionTypes.GZIP)
  } catch (e) {
    error = e.message
  }
  const c = consumer('js-gzip')
  const read = []
  await c.connect()
  await c.subscribe({ topic: 'tz', fromBeginning: true })
  await c.run({ eachMessage: async ({ message }) => read.push(short(message)) })
  try {
    await waitFor('the gzip batch', 30000, () => read.length >= PER_BATCH)
  } catch (e) {
    log('gzip:', e.message)
  }
  out.gzip = { produce_error: error, read, crashes: c.crashes }
  await c.disconnect()
}

// Two members, one leaves, a third resumes from the commits.
async function groupStep(producer, out) {
  const keyed = (from, to) => {
    const m = []
    for (let i = from; i < to; i++) m.push({ key: `k${i % 16}`, value: `g-${i}` })
    return m
  }
  await producer.send({ topic: 'tg', acks: -1, messages: keyed(0, 400) })
  const seen = new Map() // value -> member
  const partitionsOf = { A: new Set(), B: new Set() }
  const member = (name) => {
    const c = consumer('js-two')
    c.on(c.events.GROUP_JOIN, (e) => {
      partitionsOf[name] = new Set((e.payload.memberAssignment.tg || []).map(String))
      log(name, 'joined with', [...partitionsOf[name]])
    })
    return c
  }
  const runMember = async (c, name) => {
    await c.connect()
    await c.subscribe({ topic: 'tg', fromBeginning: true })
    await c.run({
      eachMessage: async ({ message }) => {
        seen.set(message.value.toString(), name)
        await sleep(5) // slow enough that the second member joins mid-way
      },
    })
  }
  const a = member('A')
  const b = member('B')
  await runMember(a, 'A')
  await sleep(1500)
  await runMember(b, 'B')
  await waitFor('both members holding partitions', 30000, () =>
    partitionsOf.A.size > 0 && partitionsOf.B.size > 0 &&
    partitionsOf.A.size + partitionsOf.B.size === 4)
  const bothHeld = [partitionsOf.A.size, partitionsOf.B.size]
  await a.disconnect()
  await waitFor('B holding all 4 partitions', 30000, () => partitionsOf.B.size === 4)
  await waitFor('all 400 records', 30000, () => seen.size >= 400)
  await b.disconnect() // commits what it read
  await producer.send({ topic: 'tg', acks: -1, messages: keyed(400, 500) })
  const c = consumer('js-two')
  const resumed = []
  await c.connect()
  await c.subscribe({ topic: 'tg', fromBeginning: true })
  await c.run({ eachMessage: async ({ message }) => resumed.push(message.value.toString()) })
  await waitFor('the 100 new records', 30000, () =>
    resumed.filter((v) => Number(v.split('-')[1]) >= 400).length >= 100)
  await sleep(1000)
  await c.disconnect()
  out.group = {
    both_held: bothHeld,
    b_held_all: partitionsOf.B.size,
    read_by_two: seen.size,
    read_by_a: [...seen.values()].filter((m) => m === 'A').length,
    resumed_new: resumed.filter((v) => Number(v.split('-')[1]) >= 400).length,
    resumed_old: resumed.filter((v) => Number(v.split('-')[1]) < 400).length,
    crashes: [...a.crashes, ...b.crashes, ...c.crashes],
  }
}

async function main() {
  const out = {}
  const producer = kafka.producer({ allowAutoTopicCreation: false })
  await producer.connect()
  const { c: limited, read } = await limitStep(producer, out)
  log('limit done', read.length)
  await outOfRangeStep(out)
  log('out-of-range done')
  await gzipStep(producer, out)
  await groupStep(producer, out)
  log('group done')
  console.log('READY')
  const rl = readline.createInterface({ input: process.stdin })
  await new Promise((resolve) => rl.once('line', resolve))
  rl.close()
  // t-0's leader was killed: write through the new one, read on past its marker.
  const before = read.length
  try {
    await produceBatch(producer, 't', 'e')
    await waitFor('the batch after the leader change', 60000, () => read.length >= before + PER_BATCH)
  } catch (e) {
    log('leader change:', e.message)
  }
  out.leader_change = { read: read.slice(before), crashes: limited.crashes }
  console.log(JSON.stringify(out))
  await Promise.race([Promise.all([limited.disconnect(), producer.disconnect()]), sleep(5000)])
  process.exit(0)
}

main().catch((e) => {
  console.log(JSON.stringify({ fatal: String(e && e.stack) }))
  process.exit(1)
})
