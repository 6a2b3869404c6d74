-- BatchLane: the batch lane's manifests by state, their items by state,
-- and the finished manifests that did not complete every item on their own
-- (partial completions: some item failed, was sent back or dropped).
SELECT 'manifest' AS kind, state, count(*) AS n FROM batch_manifests GROUP BY state
UNION ALL
SELECT 'item', state, count(*) FROM batch_manifest_items GROUP BY state
UNION ALL
SELECT 'partial', 'done', count(*) FROM batch_manifests m
WHERE m.state = 'done' AND EXISTS (SELECT 1 FROM batch_manifest_items i WHERE i.manifest_id = m.id AND i.state <> 'completed');
