// The item counts of the scope's memory (Key and scope card).
import { call } from "./api.js";
import { $ } from "./dom.js";
import { fail } from "./status.js";

const IDS = ["count-l0", "count-l1", "count-l2", "count-l3"];

let latest = 0; // the newest refresh: only its answers are shown

// False when it failed. A late answer never overwrites a newer one (a set-up applied on page load
// from the tab's stored scope, then another scope applied at once): when a newer refresh began
// meanwhile, this one shows nothing — neither counts nor an error — and says true (nothing failed).
export async function refreshCounts() {
  const mine = ++latest;
  try {
    const [l0, l1, l2, l3] = await Promise.all([
      call("v3/conversation/count"), call("v3/atomic/count"), call("v3/scenario/count"), call("v3/core/count"),
    ]);
    if (mine !== latest) return true;
    [l0.total, l1.total, l2.total, l3.total].forEach((value, i) => { $(IDS[i]).textContent = String(value ?? 0); });
    return true;
  } catch (error) {
    if (mine !== latest) return true;
    IDS.forEach((id) => { $(id).textContent = "—"; });
    fail(error);
    return false;
  }
}
