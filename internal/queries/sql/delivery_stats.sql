-- switchyard.delivery_stats: per-minute delivery counts for the dashboard.

-- name: DeliveryStatsPrune :execrows
DELETE FROM switchyard.delivery_stats WHERE second < @cutoff;
