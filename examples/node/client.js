// A Node.js client of the referee: the contract loaded from protos/ at run time, nothing generated.
// Install its packages once, then run it from any directory (docs/clients.md, "Examples"):
//   npm install --prefix examples/node
//   node examples/node/client.js [HOST:PORT]
const path = require("path");
const grpc = require("@grpc/grpc-js");
const protoLoader = require("@grpc/proto-loader");

const definition = protoLoader.loadSync("remigio/referee/v1/referee.proto", {
  includeDirs: [path.join(__dirname, "..", "..", "protos")], // found from this file, not the directory it runs in
  keepCase: true, enums: String, defaults: true,
});
const { RefereeService } = grpc.loadPackageDefinition(definition).remigio.referee.v1;
const referee = new RefereeService(process.argv[2] || "127.0.0.1:50051", grpc.credentials.createInsecure());

// One call, as a promise, with a 5-second deadline.
const call = (method, request) => new Promise((resolve, reject) => {
  const deadline = new Date(Date.now() + 5000);
  referee[method](request, { deadline }, (error, reply) => (error ? reject(error) : resolve(reply)));
});

(async () => {
  const solved = await call("SolveHand", { cards: "AH 2H 3H 5C 5D 5S KS KD 9C JK".split(" ") });
  console.log(solved.linking.points); // 9
  const checked = await call("CheckClose", { cards: "3H 4H 5H 6H JK 8H 9H 10H JH QH 2C".split(" ") });
  console.log(checked.close.valid, checked.close.kind, checked.close.multiplier); // true CLOSE_KIND_STRAIGHT_FLUSH 5
})()
  .catch((error) => { console.error(error.details || error.message); process.exitCode = 1; })
  .finally(() => referee.close());
