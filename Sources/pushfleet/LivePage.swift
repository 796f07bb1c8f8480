/// The live page: one self-contained document (no CDN, no external script or font), fed by
/// `/events`. It draws with SVG and keeps, for tests and for the curious, a log of every rule's
/// change of state and the page's own counts on `<body>` (`data-frames`, `data-reconnects`,
/// `data-sends`).
enum LivePage {
    static let html = #"""
<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>pushfleet live</title>
<meta name="viewport" content="width=device-width, initial-scale=1">
<style>
body{font:14px/1.4 system-ui,-apple-system,"Segoe UI",sans-serif;margin:0;color:#1b1f24;background:#f6f7f9}
header{background:#1b1f24;color:#fff;padding:10px 18px;display:flex;gap:18px;align-items:baseline;flex-wrap:wrap}
header h1{font-size:17px;margin:0}header .dim{color:#aab}
main{padding:14px 18px;display:grid;grid-template-columns:repeat(auto-fill,minmax(520px,1fr));gap:14px}
section{background:#fff;border:1px solid #dde;border-radius:6px;padding:10px 12px}
section h2{font-size:13px;margin:0 0 6px;text-transform:uppercase;letter-spacing:.04em;color:#556}
.cards{display:flex;gap:10px;flex-wrap:wrap}.card{min-width:92px}.card b{display:block;font-size:20px}
table{border-collapse:collapse;width:100%}td,th{padding:3px 6px;border-bottom:1px solid #eef;text-align:left;font-variant-numeric:tabular-nums}
th{color:#556;font-weight:600}.num{text-align:right}
.state{padding:1px 7px;border-radius:9px;font-size:12px;font-weight:600}
.ok{background:#dff3e4;color:#1f6b33}.breaching{background:#fff1cc;color:#7a5600}.failed{background:#fbdada;color:#8c1d1d}.waiting{background:#eee;color:#666}
#verdict{display:none;grid-column:1/-1;font-size:16px}#verdict.passed{border-color:#7c7}#verdict.failed,#verdict.aborted{border-color:#d66}#verdict.inconclusive{border-color:#db3}
svg{width:100%;height:170px;display:block}svg text{font-size:10px;fill:#667}
.legend span{margin-right:12px;font-size:12px}.legend i{display:inline-block;width:10px;height:3px;margin-right:4px;vertical-align:middle}
#log{max-height:160px;overflow:auto;margin:0;padding-left:18px;font-size:12px}
</style></head>
<body data-frames="0" data-reconnects="0" data-sends="">
<header><h1 id="title">pushfleet live</h1><span id="phase" class="dim">connecting…</span><span id="clock" class="dim"></span><span id="link" class="dim"></span></header>
<main>
<section id="verdict"></section>
<section id="capacity" style="display:none;grid-column:1/-1"><h2>Capacity search</h2><p id="bracket"></p><table id="steps"></table></section>
<section id="capacity-latency" style="display:none"><h2>Delivery latency against load (ms)</h2><svg id="chart-load-latency"></svg><div class="legend" id="legend-load-latency"></div></section>
<section id="capacity-throughput" style="display:none"><h2>Throughput against load</h2><svg id="chart-load-throughput"></svg><div class="legend" id="legend-load-throughput"></div></section>
<section id="shards" style="display:none"><h2>Shards</h2><table id="shard-table"></table></section>
<section><h2>Now</h2><div class="cards" id="cards"></div></section>
<section><h2>Sends per second: offered and made</h2><svg id="chart-sends"></svg><div class="legend" id="legend-sends"></div></section>
<section><h2>Pushes received per second</h2><svg id="chart-received"></svg><div class="legend" id="legend-received"></div></section>
<section><h2>Delivery and end to end (ms, corrected, over the window)</h2><svg id="chart-latency"></svg><div class="legend" id="legend-latency"></div></section>
<section><h2>Each hop's p99 (ms, over the window)</h2><svg id="chart-hops"></svg><div class="legend" id="legend-hops"></div></section>
<section><h2>Rules over the window and so far</h2><table id="rules"></table><p class="dim" id="window"></p></section>
<section><h2>The ledger</h2><table id="ledger"></table></section>
<section><h2>Each platform's funnel so far</h2><table id="funnel"></table></section>
<section><h2>Errors by class</h2><table id="errors"></table></section>
<section><h2>The generator</h2><table id="generator"></table></section>
<section><h2>Rule changes and markers</h2><ol id="log"></ol></section>
</main>
<script>
"use strict";
const $ = id => document.getElementById(id);
const colors = ["#2f6fdf","#e07b22","#2a9d5c","#c43c5b","#8a5cc4","#6b7b8c"];
let run = null, series = null, states = {}, ended = false, lastJudged = null, steps = [], current = null;
function reset(hello){
  run = hello; steps = []; current = null;
  for(const id of ["capacity","capacity-latency","capacity-throughput"]) $(id).style.display = hello.capacity ? "block" : "none";
  if(hello.capacity) drawSteps();
  series = {seconds:[], offered:[], made:[], received:[], latency:{}, hops:{}, markers:[]};
  lastJudged = null;
  $("title").textContent = "pushfleet live: " + hello.scenario;
  document.title = "pushfleet: " + hello.scenario;
  $("window").textContent = "Window: the sends intended in the " + hello.windowSeconds + " s before a deadline (" + hello.deadlineSeconds + " s) ago; so far: every send before then.";
  document.body.dataset.frames = "0";
}
function fmt(v, digits){ if(v===null||v===undefined) return "–"; if(typeof v==="number"&&Number.isInteger(v)) return v.toLocaleString("en"); return typeof v==="number" ? (Math.abs(v)>=100||digits===0 ? Math.round(v).toLocaleString("en") : v.toFixed(digits===undefined?2:digits)) : v; }
function row(cells, head){ const tr=document.createElement("tr"); for(const c of cells){ const td=document.createElement(head?"th":"td"); if(c instanceof Node) td.appendChild(c); else td.textContent=c; if(typeof c==="number") td.className="num"; tr.appendChild(td);} return tr; }
function fill(table, head, rows){ table.replaceChildren(row(head,true), ...rows.map(r=>row(r))); }
function badge(state){ const s=document.createElement("span"); s.className="state "+state; s.textContent=state; return s; }
function log(text){ const li=document.createElement("li"); li.textContent=text; $("log").appendChild(li); }
function draw(id, lines, legendId, xUnit){
  xUnit = xUnit || "s";
  const svg=$(id), w=svg.clientWidth||500, h=170, pad=34;
  const all=lines.flatMap(l=>l.points); const xs=all.map(p=>p[0]), ys=all.map(p=>p[1]);
  svg.setAttribute("viewBox","0 0 "+w+" "+h);
  const parts=[];
  if(all.length){
    const x0=Math.min(...xs), x1=Math.max(...xs, x0+1), y1=Math.max(...ys, 1e-9)*1.1;
    const X=x=>pad+(x-x0)/(x1-x0)*(w-pad-8), Y=y=>h-18-(y/y1)*(h-28);
    for(const t of [0,0.5,1]){ const y=Y(t*y1); parts.push('<line x1="'+pad+'" x2="'+(w-8)+'" y1="'+y+'" y2="'+y+'" stroke="#eee"/><text x="2" y="'+(y+3)+'">'+fmt(t*y1, y1<10?1:0)+'</text>'); }
    parts.push('<text x="'+pad+'" y="'+(h-4)+'">'+fmt(x0,0)+' '+xUnit+'</text><text x="'+(w-90)+'" y="'+(h-4)+'">'+fmt(x1,0)+' '+xUnit+'</text>');
    if(xUnit==="s") for(const m of series.markers){ if(m.second>=x0&&m.second<=x1){ parts.push('<line x1="'+X(m.second)+'" x2="'+X(m.second)+'" y1="8" y2="'+(h-18)+'" stroke="#c43c5b" stroke-dasharray="3,3"/>'); } }
    lines.forEach((l,i)=>{ if(l.points.length) parts.push('<polyline fill="none" stroke-width="1.6" stroke="'+colors[i%colors.length]+'" points="'+l.points.map(p=>X(p[0]).toFixed(1)+","+Y(p[1]).toFixed(1)).join(" ")+'"/>'); });
  }
  svg.innerHTML=parts.join("");
  $(legendId).innerHTML=lines.map((l,i)=>'<span><i style="background:'+colors[i%colors.length]+'"></i>'+l.name+'</span>').join("");
  svg.dataset.redraws=String(Number(svg.dataset.redraws||0)+1);
}
function onFrame(f){
  const body=document.body; body.dataset.frames=String(Number(body.dataset.frames)+1);
  const seen=body.dataset.sends? body.dataset.sends.split(","):[];
  if(seen[seen.length-1]!==String(f.totals.sends)){ seen.push(String(f.totals.sends)); body.dataset.sends=seen.slice(-60).join(","); }
  $("phase").textContent=f.phase; $("clock").textContent=fmt(f.second,1)+" s";
  if(f.shards){
    $("shards").style.display="block";
    const cls=s=>s==="done"?"ok":s==="failed"?"failed":s==="stopped"?"breaching":"waiting";
    fill($("shard-table"),["shard","state","events","why"],f.shards.map(s=>[s.index+"/"+f.shards.length, badge(cls(s.state)), s.events, s.reason||""]));
    for(const s of f.shards){ const el=$("shard-table").rows[s.index+1]; if(el) el.cells[1].firstChild.textContent=s.state; }
    for(const s of f.shards){ const key="shard "+s.index; if(states[key]!==s.state){ log("t="+fmt(f.second,1)+" s shard "+s.index+": "+s.state); states[key]=s.state; } }
  }
  for(const s of f.seconds){ series.offered.push([s.second,s.sends+s.dropped]); series.made.push([s.second,s.sends]); series.received.push([s.second,s.received]); }
  for(const m of f.markers){ series.markers.push(m); log("t="+fmt(m.second,1)+" s marker: "+m.label); }
  // A frame without a judgement keeps the last one's tables; only a new one adds points.
  const fresh=f.judged; if(fresh) lastJudged=fresh;
  const d=f.devices, t=f.totals, j=lastJudged;
  const cards=[["devices ready",d.ready.toLocaleString("en")+" / "+d.planned.toLocaleString("en")],["devices failed",d.failed],["sends",t.sends],["send failures",t.sendFailures],["dropped",t.sendsDropped],["received",t.received],["errors",t.errors],["in flight",j?j.inFlight:"–"]];
  $("cards").innerHTML=cards.map(c=>'<div class="card"><b>'+fmt(c[1],0)+'</b>'+c[0]+'</div>').join("");
  if(fresh){
    for(const [name,l] of Object.entries(j.latency)){
      const target=name.startsWith("hop.")?series.hops:series.latency;
      if(name.startsWith("hop.")){ (target[name+" p99"]=target[name+" p99"]||[]).push([j.windowEnd,l.p99]); }
      else if(name!=="http.send"){ (target[name+" p50"]=target[name+" p50"]||[]).push([j.windowEnd,l.p50]); (target[name+" p99"]=target[name+" p99"]||[]).push([j.windowEnd,l.p99]); }
    }
    fill($("rules"),["rule","","window","so far","state"], j.rules.map(r=>[r.metric+(r.origin?" (default)":""), r.expression, fmt(r.windowMeasured)+r.unit, fmt(r.soFarMeasured)+r.unit, badge(r.state)]));
    for(const r of j.rules){ const key=r.metric+" "+r.expression; if(states[key]!==r.state){ if(states[key]!==undefined||r.state!=="ok"&&r.state!=="waiting") log("t="+fmt(f.second,1)+" s "+key+": "+(states[key]||"start")+" → "+r.state); states[key]=r.state; } }
    const w=j.windowDelivery, s=j.soFarDelivery;
    const stages=[["sends","sends"],["sends accepted","sendsAccepted"],["pairs expected","expected"],["handed to the push service","handed"],["accepted","accepted"],["written to the device","written"],["received","received"],["in hand","inHand"]];
    const platforms=Object.keys(j.funnel).sort();
    fill($("funnel"),["stage"].concat(platforms),stages.map(s=>[s[0]].concat(platforms.map(p=>j.funnel[p][s[1]]===undefined?"–":j.funnel[p][s[1]]))));
    fill($("ledger"),["pairs","window","so far"],[["expected",w.expected,s.expected],["delivered",w.delivered,s.delivered],["late",w.late,s.late],["lost",w.lost,s.lost],["misdelivered",w.misdelivered,s.misdelivered],["duplicates",w.duplicates,s.duplicates],["leaks",w.leaks,s.leaks],["in flight","",j.inFlight],["offered sends/s",fmt(j.offeredRate,1),""],["delivered pairs/s",fmt(j.throughput,1),""]]);
  }
  fill($("errors"),["class","count"],Object.entries(f.errors).sort((a,b)=>b[1]-a[1]).map(e=>[e[0],e[1]]));
  fill($("generator"),["measure","value"],[["late wakes",f.generator.lateWakes],["longest wake lag (ms)",fmt(f.generator.longestWakeLagMs)],["event lag (ms)",fmt(f.generator.eventLagMs)],["CPU of the process (cores)",f.generator.cpuCores===undefined||f.generator.cpuCores===null?"–":fmt(f.generator.cpuCores)],["judgement cost (ms)",j?fmt(j.costMs):"–"]]);
  draw("chart-sends",[{name:"offered",points:series.offered},{name:"made",points:series.made}],"legend-sends");
  draw("chart-received",[{name:"received",points:series.received}],"legend-received");
  draw("chart-latency",Object.entries(series.latency).map(([n,p])=>({name:n,points:p})),"legend-latency");
  draw("chart-hops",Object.entries(series.hops).map(([n,p])=>({name:n,points:p})),"legend-hops");
}
function stepLabel(s){ return "step "+s.index+" ("+s.phase+") "+fmt(s.load,1)+" "+run.capacity.unit; }
function onStep(s){
  current = s; series = {seconds:[], offered:[], made:[], received:[], latency:{}, hops:{}, markers:[]}; lastJudged = null; states = {};
  for(const id of ["rules","ledger","funnel"]) $(id).replaceChildren();
  log(stepLabel(s)+": started"); drawSteps();
}
function onStepDone(d){
  steps.push(d.step); current = null;
  $("bracket").textContent = "bracket: last pass "+(d.lastPass===null||d.lastPass===undefined?"–":fmt(d.lastPass,1))+", first fail "+(d.firstFail===null||d.firstFail===undefined?"–":fmt(d.firstFail,1))+" "+run.capacity.unit;
  log(stepLabel(d.step)+": "+d.step.verdict+((d.step.breaches||[]).length?" — "+d.step.breaches[0]:(d.step.generatorLimits||[]).length?" — "+d.step.generatorLimits[0]:""));
  drawSteps();
}
function drawSteps(){
  const rows = steps.map(s=>[s.index, s.phase, fmt(s.load,1), badge(s.verdict==="pass"?"ok":s.verdict==="invalid"?"breaching":"failed"), fmt(s.offeredRate,1), fmt(s.throughput,1), fmt(s.deliveryP50Ms), fmt(s.deliveryP99Ms), (s.breaches||[])[0]||(s.generatorLimits||[])[0]||""]);
  if(current) rows.push([current.index, current.phase, fmt(current.load,1), badge("waiting"), "", "", "", "", "running"]);
  fill($("steps"),["step","phase","load","verdict","offered/s","delivered/s","p50 ms","p99 ms","why"], rows);
  const byLoad = steps.slice().sort((a,b)=>a.load-b.load);
  draw("chart-load-latency",[{name:"delivery p50",points:byLoad.filter(s=>s.deliveryP50Ms!=null).map(s=>[s.load,s.deliveryP50Ms])},{name:"delivery p99",points:byLoad.filter(s=>s.deliveryP99Ms!=null).map(s=>[s.load,s.deliveryP99Ms])}],"legend-load-latency",run.capacity.unit);
  draw("chart-load-throughput",[{name:"offered sends/s",points:byLoad.map(s=>[s.load,s.offeredRate])},{name:"delivered pairs/s",points:byLoad.map(s=>[s.load,s.throughput])}],"legend-load-throughput",run.capacity.unit);
}
function onEnd(e){
  ended=true;
  const v=$("verdict"); v.style.display="block"; v.className=e.verdict;
  v.innerHTML="<b>"+e.verdict+"</b> (exit "+e.exitCode+")"+(e.reason?": "+e.reason:"")+(e.summary?"<br>"+e.summary.replace(/</g,"&lt;"):"")+(e.failed.length?"<br>failed: "+e.failed.map(x=>x.replace(/</g,"&lt;")).join("; "):"")+'<br>reports: <a href="'+e.reports+'/report.html">'+e.reports+'</a>';
  $("phase").textContent="done: "+e.verdict; log("verdict: "+e.verdict+" (exit "+e.exitCode+")");
}
let opened=0;
// ?frames=N: a still of the page after N frames (the stream is closed, nothing reconnects).
const still=Number(new URLSearchParams(location.search).get("frames")||0);
function connect(){
  const es=new EventSource("/events"+location.search);
  es.addEventListener("hello",m=>{ reset(JSON.parse(m.data)); });
  es.addEventListener("frame",m=>onFrame(JSON.parse(m.data)));
  es.addEventListener("step",m=>onStep(JSON.parse(m.data)));
  es.addEventListener("stepDone",m=>onStepDone(JSON.parse(m.data)));
  if(still>0) es.addEventListener("frame",()=>{ if(Number(document.body.dataset.frames)>=still){ ended=true; es.close(); $("phase").textContent+=" (a still after "+still+" frames)"; } });
  es.addEventListener("end",m=>{ onEnd(JSON.parse(m.data)); es.close(); });
  es.onopen=()=>{ opened++; if(opened>1){ document.body.dataset.reconnects=String(opened-1); log("reconnected"); } };
  es.onerror=()=>{ if(!ended) $("phase").textContent="reconnecting…"; };
}
connect();
</script></body></html>
"""#
}
