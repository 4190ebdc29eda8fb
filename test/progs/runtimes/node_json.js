// A JSON-heavy loop for node: parse and stringify a document of nested
// records for SECONDS (argv[2], default 3). With an addon path as argv[3],
// calls its hot(n) in the loop instead. With NODE_JSON_MAPS set, writes its
// executable mappings there at the end (V8 unmaps some before exit).
'use strict';
const seconds = Number(process.argv[2] || 3);
const addon = process.argv[3] ? require(process.argv[3]) : null;
const doc = [];
for (let i = 0; i < 200; i++)
  doc.push({id: i, name: 'record ' + i, tags: ['a', 'b', 'c' + i],
            nested: {x: i * 1.5, y: [i, i + 1, i + 2], ok: i % 2 === 0}});
const text = JSON.stringify(doc);
let sum = 0;
const end = Date.now() + seconds * 1000;
function parseRound() { return JSON.parse(text).length; }
function stringifyRound(v) { return JSON.stringify(v).length; }
while (Date.now() < end) {
  if (addon) {
    sum += addon.hot(2e6);
  } else {
    sum += parseRound();
    sum += stringifyRound(doc);
  }
}
if (process.env.NODE_JSON_MAPS) {
  const fs = require('fs');
  const maps = fs.readFileSync('/proc/self/maps', 'utf8').split('\n');
  fs.writeFileSync(process.env.NODE_JSON_MAPS,
                   maps.filter((l) => / ..x. /.test(l)).join('\n') + '\n');
}
console.log('node_json: done', sum > 0);
