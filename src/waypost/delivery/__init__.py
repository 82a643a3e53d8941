"""Delivery: the outbox relay, its targets, and the documents it sends.

The relay claims due outbox rows with a lease, sends each to its target, and records the
outcome in one transaction with the run's `delivered` / `delivery_failed` event.
"""
