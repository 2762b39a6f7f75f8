// The interop client of internal/kafka's TestNodeClient: @platformatic/kafka,
// a Node client that implements only Kafka 3.5+ protocol versions
// (CreateTopics v7, FindCoordinator v4+, OffsetFetch v8+, ...). Usage:
//   node client.mjs BROKER TOPIC GROUP COUNT
// It prints one line per fact the Go test checks.
import { Admin, Consumer, Producer, stringDeserializers, stringSerializers } from '@platformatic/kafka'

const [broker, topic, group, countArg] = process.argv.slice(2)
const count = Number(countArg)
const base = { clientId: 'sluice-node', bootstrapBrokers: [broker], retries: 3 }
const out = line => process.stdout.write(line + '\n')

const admin = new Admin(base)
const created = await admin.createTopics({ topics: [topic], partitions: 3, replicas: 1 })
out(`created ${created[0].name} ${created[0].partitions}`)

const producer = new Producer({ ...base, serializers: stringSerializers })
const messages = []
for (let i = 0; i < count; i++) messages.push({ topic, key: `key${i % 7}`, value: `node-${i}` })
await producer.send({ messages })
await producer.close()

// Consume everything with a group, committing as we go.
async function consumeAll (mode) {
  const consumer = new Consumer({ ...base, groupId: group, deserializers: stringDeserializers })
  const stream = await consumer.consume({ topics: [topic], mode, fallbackMode: 'earliest', autocommit: false, maxWaitTime: 200 })
  const got = []
  for await (const m of stream) {
    got.push(`${m.key}:${m.value}`)
    await m.commit()
    if (got.length === count) break
  }
  await stream.close()
  await consumer.close()
  return got
}
for (const line of await consumeAll('earliest')) out(`rec ${line}`)

// resetOffsets to earliest, as tools do it: commit -2 to every partition.
const partitionOffsets = [0, 1, 2].map(partition => ({ partition, offset: -2n }))
await admin.alterConsumerGroupOffsets({ groupId: group, topics: [{ name: topic, partitionOffsets }] })
const [offsets] = await admin.listConsumerGroupOffsets({ groups: [group] })
for (const t of offsets.topics) {
  for (const p of t.partitions) out(`committed ${p.partitionIndex} ${p.committedOffset}`)
}
// The group starts over from its committed -2 ("earliest").
out(`reread ${(await consumeAll('committed')).length}`)

await admin.incrementalAlterConfigs({
  resources: [{ resourceType: 2, resourceName: topic, configs: [{ name: 'retention.ms', configOperation: 0, value: '3600000' }] }]
})
const [desc] = await admin.describeConfigs({ resources: [{ resourceType: 2, resourceName: topic, configurationKeys: ['retention.ms'] }] })
for (const c of desc.configs) out(`config ${c.name} ${c.value}`)

await admin.deleteTopics({ topics: [topic] })
out('deleted')
await admin.close()
