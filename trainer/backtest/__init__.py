"""backtest"""
